package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	_ "embed"

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
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		var err error
		if c.MaxNanoUSD == 0 {
			_, err = tx.ExecContext(ctx, spendCapDeleteSQL, sql.Named("tenant", c.Tenant))
		} else {
			_, err = tx.ExecContext(ctx, spendCapSetSQL, sql.Named("tenant", c.Tenant), sql.Named("period", string(c.Period)),
				sql.Named("max_nano_usd", c.MaxNanoUSD))
		}
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, runRequeueStoppedSQL, sql.Named("tenant", c.Tenant),
			sql.Named("stop_reason", store.StopTenantSpendCap), sql.Named("now", sqlrow.Nanos(p.Now)))
		if err != nil {
			return err
		}
		return raiseWakeupIf(ctx, tx, res)
	})
	if err != nil {
		return fmt.Errorf("set spend cap of %s: %w", c.Tenant, err)
	}
	return nil
}

// SpendCaps returns every tenant's spend cap, by tenant.
func (s *Store) SpendCaps(ctx context.Context) ([]store.SpendCap, error) {
	rows, err := s.read.QueryContext(ctx, spendCapListSQL)
	if err != nil {
		return nil, fmt.Errorf("spend caps: %w", err)
	}
	defer rows.Close()
	var out []store.SpendCap
	for rows.Next() {
		var c store.SpendCap
		if err := rows.Scan(&c.Tenant, &c.Period, &c.MaxNanoUSD); err != nil {
			return nil, fmt.Errorf("spend caps: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("spend caps: %w", err)
	}
	return out, nil
}

// TenantSpend returns what a tenant spent in a window.
func (s *Store) TenantSpend(ctx context.Context, tenant string, window time.Time) (int64, error) {
	var n int64
	err := s.read.QueryRowContext(ctx, tenantSpendGetSQL, sql.Named("tenant", tenant),
		sql.Named("window_start", sqlrow.Nanos(window))).Scan(&n)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("spend of %s: %w", tenant, err)
	}
	return n, nil
}

// AddTenantSpend adds to what a tenant spent in a window.
func (s *Store) AddTenantSpend(ctx context.Context, p store.AddTenantSpendParams) error {
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		_, err := tx.ExecContext(ctx, tenantSpendAddSQL, sql.Named("tenant", p.Tenant),
			sql.Named("window_start", sqlrow.Nanos(p.Window)), sql.Named("nano_usd", p.NanoUSD))
		return err
	})
	if err != nil {
		return fmt.Errorf("add spend of %s: %w", p.Tenant, err)
	}
	return nil
}
