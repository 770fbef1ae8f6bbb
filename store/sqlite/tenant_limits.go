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
	//go:embed query/agent_limit_set.sql
	agentLimitSetSQL string
	//go:embed query/agent_limit_delete.sql
	agentLimitDeleteSQL string
	//go:embed query/agent_limit_list.sql
	agentLimitListSQL string
	//go:embed query/agent_limit_get.sql
	agentLimitGetSQL string
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
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		if l.MaxRunning == 0 && l.StartsPerMinute == 0 {
			_, err := tx.ExecContext(ctx, tenantLimitDeleteSQL, sql.Named("tenant", l.Tenant))
			return err
		}
		_, err := tx.ExecContext(ctx, tenantLimitSetSQL, sql.Named("tenant", l.Tenant), sql.Named("max_running", l.MaxRunning),
			sql.Named("starts_per_minute", l.StartsPerMinute))
		return err
	})
	if err != nil {
		return fmt.Errorf("set tenant limit of %s: %w", l.Tenant, err)
	}
	return nil
}

// TenantLimits returns every tenant's limits, by tenant.
func (s *Store) TenantLimits(ctx context.Context) ([]store.TenantLimit, error) {
	var out []store.TenantLimit
	err := s.readAll(ctx, tenantLimitListSQL, func(rows *sql.Rows) error {
		var l store.TenantLimit
		err := rows.Scan(&l.Tenant, &l.MaxRunning, &l.StartsPerMinute)
		out = append(out, l)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("tenant limits: %w", err)
	}
	return out, nil
}

// SetAgentLimit sets an agent's cap on its running runs and its start
// rate; both 0 remove them.
func (s *Store) SetAgentLimit(ctx context.Context, l store.AgentLimit) error {
	if err := l.Check(); err != nil {
		return fmt.Errorf("set agent limit: %w", err)
	}
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		if l.MaxRunning == 0 && l.StartsPerMinute == 0 {
			_, err := tx.ExecContext(ctx, agentLimitDeleteSQL, sql.Named("agent", l.Agent))
			return err
		}
		_, err := tx.ExecContext(ctx, agentLimitSetSQL, sql.Named("agent", l.Agent), sql.Named("max_running", l.MaxRunning),
			sql.Named("starts_per_minute", l.StartsPerMinute))
		return err
	})
	if err != nil {
		return fmt.Errorf("set agent limit of %s: %w", l.Agent, err)
	}
	return nil
}

// AgentLimits returns every agent's limits, by agent.
func (s *Store) AgentLimits(ctx context.Context) ([]store.AgentLimit, error) {
	var out []store.AgentLimit
	err := s.readAll(ctx, agentLimitListSQL, func(rows *sql.Rows) error {
		var l store.AgentLimit
		err := rows.Scan(&l.Agent, &l.MaxRunning, &l.StartsPerMinute)
		out = append(out, l)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("agent limits: %w", err)
	}
	return out, nil
}

// readAll runs a query on the read pool and calls scan for each row.
func (s *Store) readAll(ctx context.Context, query string, scan func(*sql.Rows) error) error {
	rows, err := s.read.QueryContext(ctx, query)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}
