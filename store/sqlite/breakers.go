package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	_ "embed"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/breaker_list.sql
	breakerListSQL string
	//go:embed query/breaker_get.sql
	breakerGetSQL string
	//go:embed query/breaker_put.sql
	breakerPutSQL string
)

var _ store.BreakerKeeper = (*Store)(nil)

// Breakers returns every stored breaker, by name.
func (s *Store) Breakers(ctx context.Context) ([]store.Breaker, error) {
	rows, err := s.read.QueryContext(ctx, breakerListSQL)
	if err != nil {
		return nil, fmt.Errorf("breakers: %w", err)
	}
	defer rows.Close()
	var out []store.Breaker
	for rows.Next() {
		b, err := sqlrow.Breaker(rows)
		if err != nil {
			return nil, fmt.Errorf("breakers: %w", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("breakers: %w", err)
	}
	return out, nil
}

// BreakerFailure records a failure of a breaker's dependency.
func (s *Store) BreakerFailure(ctx context.Context, p store.BreakerFailureParams) (store.Breaker, error) {
	if err := p.Check(); err != nil {
		return store.Breaker{}, err
	}
	return s.changeBreaker(ctx, p.Name, func(b store.Breaker, found bool) store.Breaker { return b.Fail(found, p) })
}

// BreakerProbe asks for the probe of an open breaker.
func (s *Store) BreakerProbe(ctx context.Context, p store.BreakerProbeParams) (store.Breaker, error) {
	if err := p.Check(); err != nil {
		return store.Breaker{}, err
	}
	return s.changeBreaker(ctx, p.Name, func(b store.Breaker, found bool) store.Breaker { return b.Probe(found, p) })
}

// BreakerSuccess records a probe's success.
func (s *Store) BreakerSuccess(ctx context.Context, p store.BreakerSuccessParams) (store.Breaker, error) {
	return s.changeBreaker(ctx, p.Name, func(b store.Breaker, found bool) store.Breaker { return b.Succeed(found, p) })
}

// changeBreaker reads a breaker and writes what change makes of it, in one
// write: the writer is the store's only one, so no other change
// interleaves.
func (s *Store) changeBreaker(ctx context.Context, name string, change func(store.Breaker, bool) store.Breaker) (store.Breaker, error) {
	var out store.Breaker
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		cur, err := sqlrow.Breaker(tx.QueryRowContext(ctx, breakerGetSQL, sql.Named("name", name)))
		found := err == nil
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		out = change(cur, found)
		if out == cur {
			return nil
		}
		var args []any
		for k, v := range sqlrow.BreakerArgs(out) {
			args = append(args, sql.Named(k, v))
		}
		_, err = tx.ExecContext(ctx, breakerPutSQL, args...)
		return err
	})
	if err != nil {
		return store.Breaker{}, fmt.Errorf("breaker %s: %w", name, err)
	}
	return out, nil
}
