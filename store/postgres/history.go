package postgres

import (
	"context"
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

// CustomerEffects returns the side effects that happened or may have in
// the customer's runs other than p.ExceptRun, newest begun first, as the
// tenant: row-level security confines the read to its rows whatever the
var _ store.EffectHistory = (*Store)(nil)

// RecentEffects returns the tenant's effects of p.Tool since p.Since in
// other runs, oldest first.
func (s *Store) RecentEffects(ctx context.Context, p store.RecentEffectsParams) ([]store.RecentEffect, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	var es []store.RecentEffect
	b := s.batch(p.Tenant)
	b.Queue(effectsRecentSQL, namedArgs{
		"tenant": p.Tenant, "tool": p.Tool, "since": sqlrow.Nanos(p.Since), "except_run": p.ExceptRun, "limit": p.Limit,
	}).Query(collect(&es, sqlrow.RecentEffect))
	if err := s.send(ctx, b); err != nil {
		return nil, fmt.Errorf("recent effects of %s: %w", p.Tool, err)
	}
	return es, nil
}

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
	}).Query(collect(&es, sqlrow.CustomerEffect))
	if err := s.send(ctx, b); err != nil {
		return nil, fmt.Errorf("effects of customer %s: %w", p.User, err)
	}
	return es, nil
}
