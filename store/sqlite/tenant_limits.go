package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	_ "embed"

	"github.com/belayrun/belay/store"
)

var (
	//go:embed query/tenant_limit_set.sql
	tenantLimitSetSQL string
	//go:embed query/tenant_limit_delete.sql
	tenantLimitDeleteSQL string
	//go:embed query/tenant_limit_list.sql
	tenantLimitListSQL string
	//go:embed query/tenant_limit_get.sql
	tenantLimitGetSQL string
)

var _ store.TenantLimiter = (*Store)(nil)

// SetTenantLimit sets a tenant's cap on its running runs; 0 removes it.
func (s *Store) SetTenantLimit(ctx context.Context, l store.TenantLimit) error {
	if l.Tenant == "" || l.MaxRunning < 0 {
		return fmt.Errorf("set tenant limit %+v: want a tenant and a cap of 0 (none) or more", l)
	}
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		if l.MaxRunning == 0 {
			_, err := tx.ExecContext(ctx, tenantLimitDeleteSQL, sql.Named("tenant", l.Tenant))
			return err
		}
		_, err := tx.ExecContext(ctx, tenantLimitSetSQL, sql.Named("tenant", l.Tenant), sql.Named("max_running", l.MaxRunning))
		return err
	})
	if err != nil {
		return fmt.Errorf("set tenant limit of %s: %w", l.Tenant, err)
	}
	return nil
}

// TenantLimits returns every tenant's cap, by tenant.
func (s *Store) TenantLimits(ctx context.Context) ([]store.TenantLimit, error) {
	rows, err := s.read.QueryContext(ctx, tenantLimitListSQL)
	if err != nil {
		return nil, fmt.Errorf("tenant limits: %w", err)
	}
	defer rows.Close()
	var out []store.TenantLimit
	for rows.Next() {
		var l store.TenantLimit
		if err := rows.Scan(&l.Tenant, &l.MaxRunning); err != nil {
			return nil, fmt.Errorf("tenant limits: %w", err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tenant limits: %w", err)
	}
	return out, nil
}
