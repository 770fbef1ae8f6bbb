package postgres

import (
	"context"
	"fmt"

	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/breaker_list.sql
	breakerListSQL string
	//go:embed query/breaker_create.sql
	breakerCreateSQL string
	//go:embed query/breaker_get.sql
	breakerGetSQL string
	//go:embed query/breaker_put.sql
	breakerPutSQL string
)

var _ store.BreakerKeeper = (*Store)(nil)

// Breakers returns every stored breaker, by name.
func (s *Store) Breakers(ctx context.Context) ([]store.Breaker, error) {
	rows, err := s.pool.Query(ctx, breakerListSQL)
	if err != nil {
		return nil, fmt.Errorf("breakers: %w", storeError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Breaker, error) {
		return sqlrow.Breaker(row)
	})
	if err != nil {
		return nil, fmt.Errorf("breakers: %w", storeError(err))
	}
	return out, nil
}

// BreakerFailure records a failure of a breaker's dependency.
func (s *Store) BreakerFailure(ctx context.Context, p store.BreakerFailureParams) (store.Breaker, error) {
	if err := p.Check(); err != nil {
		return store.Breaker{}, err
	}
	return s.changeBreaker(ctx, p.Name, func(b store.Breaker) store.Breaker { return b.Fail(true, p) })
}

// BreakerProbe asks for the probe of an open breaker.
func (s *Store) BreakerProbe(ctx context.Context, p store.BreakerProbeParams) (store.Breaker, error) {
	if err := p.Check(); err != nil {
		return store.Breaker{}, err
	}
	return s.changeBreaker(ctx, p.Name, func(b store.Breaker) store.Breaker { return b.Probe(true, p) })
}

// BreakerSuccess records a probe's success.
func (s *Store) BreakerSuccess(ctx context.Context, p store.BreakerSuccessParams) (store.Breaker, error) {
	return s.changeBreaker(ctx, p.Name, func(b store.Breaker) store.Breaker { return b.Succeed(true, p) })
}

// changeBreaker writes what change makes of a breaker in one transaction
// that holds its row, so that workers changing it at once change it in
// turn. A breaker not stored yet is created closed first, so that there is
// a row to hold.
func (s *Store) changeBreaker(ctx context.Context, name string, change func(store.Breaker) store.Breaker) (store.Breaker, error) {
	var out store.Breaker
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, breakerCreateSQL, namedArgs{"name": name}); err != nil {
			return err
		}
		cur, err := sqlrow.Breaker(tx.QueryRow(ctx, breakerGetSQL, namedArgs{"name": name}))
		if err != nil {
			return err
		}
		if out = change(cur); out == cur {
			return nil
		}
		_, err = tx.Exec(ctx, breakerPutSQL, namedArgs(sqlrow.BreakerArgs(out)))
		return err
	})
	if err != nil {
		return store.Breaker{}, fmt.Errorf("breaker %s: %w", name, storeError(err))
	}
	return out, nil
}
