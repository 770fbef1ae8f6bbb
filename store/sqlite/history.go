package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	_ "embed"

	"github.com/belayrun/belay/store"
)

//go:embed query/customer_effects.sql
var customerEffectsSQL string

// CustomerEffects returns the side effects that happened or may have in
// the customer's runs other than p.ExceptRun, newest begun first.
func (s *Store) CustomerEffects(ctx context.Context, p store.CustomerEffectsParams) ([]store.CustomerEffect, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	rows, err := s.read.QueryContext(ctx, customerEffectsSQL,
		sql.Named("tenant", p.Tenant),
		sql.Named("user", p.User),
		sql.Named("except_run", p.ExceptRun),
		sql.Named("limit", p.Limit),
	)
	if err != nil {
		return nil, fmt.Errorf("effects of customer %s: %w", p.User, err)
	}
	defer rows.Close()
	var es []store.CustomerEffect
	for rows.Next() {
		var (
			e                     store.CustomerEffect
			inFlight, created, up int64
			sensitive             []byte
		)
		err := rows.Scan(
			&e.Tenant, &e.Key, &e.RunID, &e.Tool, &e.ArgsHash, (*[]byte)(&e.Args),
			(*string)(&e.State), (*[]byte)(&e.Result), &e.Step, &e.Attempts, &e.Epoch, &inFlight, &created, &up, &e.Agent, &sensitive,
		)
		if err != nil {
			return nil, fmt.Errorf("effects of customer %s: %w", p.User, err)
		}
		e.InFlightUntil, e.CreatedAt, e.UpdatedAt = fromNanos(inFlight), fromNanos(created), fromNanos(up)
		if e.Sensitive, err = decodeSensitive(sensitive); err != nil {
			return nil, fmt.Errorf("effects of customer %s: %w", p.User, err)
		}
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("effects of customer %s: %w", p.User, err)
	}
	return es, nil
}
