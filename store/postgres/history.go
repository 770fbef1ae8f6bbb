package postgres

import (
	"context"
	"fmt"

	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/store"
)

//go:embed query/customer_effects.sql
var customerEffectsSQL string

// CustomerEffects returns the side effects that happened or may have in
// the customer's runs other than p.ExceptRun, newest begun first, as the
// tenant: row-level security confines the read to its rows whatever the
// query says.
func (s *Store) CustomerEffects(ctx context.Context, p store.CustomerEffectsParams) ([]store.CustomerEffect, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	var es []store.CustomerEffect
	b := s.batch(p.Tenant)
	b.Queue(customerEffectsSQL, namedArgs{
		"tenant":     p.Tenant,
		"user":       p.User,
		"except_run": p.ExceptRun,
		"limit":      p.Limit,
	}).Query(func(rows pgx.Rows) error {
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
				return err
			}
			e.InFlightUntil, e.CreatedAt, e.UpdatedAt = fromNanos(inFlight), fromNanos(created), fromNanos(up)
			if e.Sensitive, err = decodeSensitive(sensitive); err != nil {
				return err
			}
			es = append(es, e)
		}
		return rows.Err()
	})
	if err := s.send(ctx, b); err != nil {
		return nil, fmt.Errorf("effects of customer %s: %w", p.User, err)
	}
	return es, nil
}
