package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/spend_cap_set.sql
	spendCapSetSQL string
	//go:embed query/spend_cap_delete.sql
	spendCapDeleteSQL string
	//go:embed query/spend_cap_list.sql
	spendCapListSQL string
	//go:embed query/tenant_spend_get.sql
	tenantSpendGetSQL string
	//go:embed query/tenant_spend_add.sql
	tenantSpendAddSQL string
)

var _ store.SpendCapper = (*Store)(nil)

// SetSpendCap sets a tenant's spend cap and wakes its runs paused on it.
func (s *Store) SetSpendCap(ctx context.Context, p store.SetSpendCapParams) error {
	c := p.Cap
	if err := c.Check(); err != nil {
		return err
	}
	b := &pgx.Batch{}
	if c.MaxNanoUSD == 0 {
		b.Queue(spendCapDeleteSQL, namedArgs{"tenant": c.Tenant})
	} else {
		b.Queue(spendCapSetSQL, namedArgs{"tenant": c.Tenant, "period": string(c.Period), "max_nano_usd": c.MaxNanoUSD})
	}
	b.Queue(runRequeueStoppedSQL, namedArgs{"tenant": c.Tenant, "stop_reason": store.StopTenantSpendCap, "now": sqlrow.Nanos(p.Now)})
	if err := s.send(ctx, b); err != nil {
		return fmt.Errorf("set spend cap of %s: %w", c.Tenant, err)
	}
	return nil
}

// SpendCaps returns every tenant's spend cap, by tenant.
func (s *Store) SpendCaps(ctx context.Context) ([]store.SpendCap, error) {
	rows, err := s.pool.Query(ctx, spendCapListSQL)
	if err != nil {
		return nil, fmt.Errorf("spend caps: %w", storeError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.SpendCap, error) {
		var c store.SpendCap
		err := row.Scan(&c.Tenant, &c.Period, &c.MaxNanoUSD)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("spend caps: %w", storeError(err))
	}
	return out, nil
}

// TenantSpend returns what a tenant spent in a window.
func (s *Store) TenantSpend(ctx context.Context, tenant string, window time.Time) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, tenantSpendGetSQL, namedArgs{"tenant": tenant, "window_start": sqlrow.Nanos(window)}).Scan(&n)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("spend of %s: %w", tenant, storeError(err))
	}
	return n, nil
}

// AddTenantSpend adds to what a tenant spent in a window.
func (s *Store) AddTenantSpend(ctx context.Context, p store.AddTenantSpendParams) error {
	_, err := s.pool.Exec(ctx, tenantSpendAddSQL, namedArgs{"tenant": p.Tenant, "window_start": sqlrow.Nanos(p.Window), "nano_usd": p.NanoUSD})
	if err != nil {
		return fmt.Errorf("add spend of %s: %w", p.Tenant, storeError(err))
	}
	return nil
}
