package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	_ "embed"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/customer_effects.sql
	customerEffectsSQL string
	//go:embed query/effects_recent.sql
	effectsRecentSQL string
)

var _ store.EffectHistory = (*Store)(nil)

// RecentEffects returns the tenant's effects of p.Tool since p.Since in
// other runs, oldest first.
func (s *Store) RecentEffects(ctx context.Context, p store.RecentEffectsParams) ([]store.RecentEffect, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	es, err := readAll(ctx, s.read, sqlrow.RecentEffect, effectsRecentSQL,
		sql.Named("tenant", p.Tenant), sql.Named("tool", p.Tool), sql.Named("since", sqlrow.Nanos(p.Since)),
		sql.Named("except_run", p.ExceptRun), sql.Named("limit", p.Limit))
	if err != nil {
		return nil, fmt.Errorf("recent effects of %s: %w", p.Tool, err)
	}
	return es, nil
}

// CustomerEffects returns the side effects that happened or may have in
// the customer's runs other than p.ExceptRun, newest begun first.
func (s *Store) CustomerEffects(ctx context.Context, p store.CustomerEffectsParams) ([]store.CustomerEffect, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	es, err := readAll(ctx, s.read, sqlrow.CustomerEffect, customerEffectsSQL,
		sql.Named("tenant", p.Tenant),
		sql.Named("user", p.User),
		sql.Named("except_run", p.ExceptRun),
		sql.Named("limit", p.Limit),
	)
	if err != nil {
		return nil, fmt.Errorf("effects of customer %s: %w", p.User, err)
	}
	return es, nil
}
