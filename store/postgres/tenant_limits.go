package postgres

import (
	"context"
	"fmt"

	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/store"
)

var (
	//go:embed query/tenant_limit_set.sql
	tenantLimitSetSQL string
	//go:embed query/tenant_limit_delete.sql
	tenantLimitDeleteSQL string
	//go:embed query/tenant_limit_list.sql
	tenantLimitListSQL string
)

var _ store.TenantLimiter = (*Store)(nil)

// SetTenantLimit sets a tenant's cap on its running runs; 0 removes it.
func (s *Store) SetTenantLimit(ctx context.Context, l store.TenantLimit) error {
	if l.Tenant == "" || l.MaxRunning < 0 {
		return fmt.Errorf("set tenant limit %+v: want a tenant and a cap of 0 (none) or more", l)
	}
	var err error
	if l.MaxRunning == 0 {
		_, err = s.pool.Exec(ctx, tenantLimitDeleteSQL, namedArgs{"tenant": l.Tenant})
	} else {
		_, err = s.pool.Exec(ctx, tenantLimitSetSQL, namedArgs{"tenant": l.Tenant, "max_running": l.MaxRunning})
	}
	if err != nil {
		return fmt.Errorf("set tenant limit of %s: %w", l.Tenant, storeError(err))
	}
	return nil
}

// TenantLimits returns every tenant's cap, by tenant.
func (s *Store) TenantLimits(ctx context.Context) ([]store.TenantLimit, error) {
	rows, err := s.pool.Query(ctx, tenantLimitListSQL)
	if err != nil {
		return nil, fmt.Errorf("tenant limits: %w", storeError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.TenantLimit, error) {
		var l store.TenantLimit
		err := row.Scan(&l.Tenant, &l.MaxRunning)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("tenant limits: %w", storeError(err))
	}
	return out, nil
}
