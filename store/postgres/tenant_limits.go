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
	//go:embed query/agent_limit_set.sql
	agentLimitSetSQL string
	//go:embed query/agent_limit_delete.sql
	agentLimitDeleteSQL string
	//go:embed query/agent_limit_list.sql
	agentLimitListSQL string
)

var (
	_ store.TenantLimiter = (*Store)(nil)
	_ store.AgentLimiter  = (*Store)(nil)
)

// SetTenantLimit sets a tenant's cap on its running runs and its start
// rate; both 0 remove them.
func (s *Store) SetTenantLimit(ctx context.Context, l store.TenantLimit) error {
	if err := l.Check(); err != nil {
		return fmt.Errorf("set tenant limit: %w", err)
	}
	var err error
	if l.MaxRunning == 0 && l.StartsPerMinute == 0 {
		_, err = s.pool.Exec(ctx, tenantLimitDeleteSQL, namedArgs{"tenant": l.Tenant})
	} else {
		_, err = s.pool.Exec(ctx, tenantLimitSetSQL, namedArgs{"tenant": l.Tenant, "max_running": l.MaxRunning,
			"starts_per_minute": l.StartsPerMinute})
	}
	if err != nil {
		return fmt.Errorf("set tenant limit of %s: %w", l.Tenant, storeError(err))
	}
	return nil
}

// TenantLimits returns every tenant's limits, by tenant.
func (s *Store) TenantLimits(ctx context.Context) ([]store.TenantLimit, error) {
	rows, err := s.pool.Query(ctx, tenantLimitListSQL)
	if err != nil {
		return nil, fmt.Errorf("tenant limits: %w", storeError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.TenantLimit, error) {
		var l store.TenantLimit
		err := row.Scan(&l.Tenant, &l.MaxRunning, &l.StartsPerMinute)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("tenant limits: %w", storeError(err))
	}
	return out, nil
}

// SetAgentLimit sets an agent's cap on its running runs and its start
// rate; both 0 remove them.
func (s *Store) SetAgentLimit(ctx context.Context, l store.AgentLimit) error {
	if err := l.Check(); err != nil {
		return fmt.Errorf("set agent limit: %w", err)
	}
	var err error
	if l.MaxRunning == 0 && l.StartsPerMinute == 0 {
		_, err = s.pool.Exec(ctx, agentLimitDeleteSQL, namedArgs{"agent": l.Agent})
	} else {
		_, err = s.pool.Exec(ctx, agentLimitSetSQL, namedArgs{"agent": l.Agent, "max_running": l.MaxRunning,
			"starts_per_minute": l.StartsPerMinute})
	}
	if err != nil {
		return fmt.Errorf("set agent limit of %s: %w", l.Agent, storeError(err))
	}
	return nil
}

// AgentLimits returns every agent's limits, by agent.
func (s *Store) AgentLimits(ctx context.Context) ([]store.AgentLimit, error) {
	rows, err := s.pool.Query(ctx, agentLimitListSQL)
	if err != nil {
		return nil, fmt.Errorf("agent limits: %w", storeError(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.AgentLimit, error) {
		var l store.AgentLimit
		err := row.Scan(&l.Agent, &l.MaxRunning, &l.StartsPerMinute)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("agent limits: %w", storeError(err))
	}
	return out, nil
}
