package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"slices"

	_ "embed"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/run_due_tenants.sql
	runDueTenantsSQL string
	//go:embed query/run_due_queued.sql
	runDueQueuedSQL string
	//go:embed query/run_tenant_running.sql
	runTenantRunningSQL string
	//go:embed query/run_agent_running.sql
	runAgentRunningSQL string
)

// candidate is a due run a claim may take.
type candidate struct {
	id, takenFrom, tenant, agent string
	priority                     int
	due                          int64
	// start says the run is queued: claiming it starts it, which takes
	// from its tenant's and its agent's start rates (startBuckets).
	start bool
	// startBuckets are the start rates the run's start takes from.
	startBuckets []store.BucketTake
	// expired says the run is running on an expired lease: it has its
	// place among its tenant's running runs already, and goes first.
	expired bool
	// load is how many runs of its tenant would be running before it.
	load int
}

// dueRuns reads the runs a claim of limit may take, in the order it takes
// them: up to limit runs on an expired lease or paused until now, and up to
// limit queued runs of each tenant that has some. It reads the runs a claim
// takes and a few more, never every run that waits.
func dueRuns(ctx context.Context, tx *writeTx, p store.ClaimRunsParams, agents string, limit int) ([]candidate, error) {
	again, err := txAll(ctx, tx, sqlrow.ReadDueRun, runDueSQL,
		sql.Named("now", sqlrow.Nanos(p.Now)), sql.Named("limit", limit), sql.Named("agents", agents))
	if err != nil {
		return nil, err
	}
	cands := make([]candidate, 0, len(again)+limit)
	for _, r := range again {
		cands = append(cands, candidate{id: r.ID, takenFrom: r.TakenFrom, tenant: r.Tenant, agent: r.Agent, priority: r.Priority,
			due: r.Due, expired: r.Expired})
	}
	var tenants []string
	err = scanRows(ctx, tx, runDueTenantsSQL, func(rows *sql.Rows) error {
		var t string
		err := rows.Scan(&t)
		tenants = append(tenants, t)
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, tenant := range tenants {
		err := scanRows(ctx, tx, runDueQueuedSQL, func(rows *sql.Rows) error {
			c := candidate{tenant: tenant, start: true}
			err := rows.Scan(&c.id, &c.agent, &c.priority, &c.due)
			cands = append(cands, c)
			return err
		}, sql.Named("tenant", tenant), sql.Named("limit", limit), sql.Named("agents", agents))
		if err != nil {
			return nil, err
		}
	}
	byTenant, byAgent := map[string]limits{}, map[string]limits{}
	for _, c := range cands {
		if _, ok := byTenant[c.tenant]; !ok {
			var l limits
			if err := tx.QueryRowContext(ctx, runTenantRunningSQL, sql.Named("tenant", c.tenant)).Scan(&l.running); err != nil {
				return nil, err
			}
			if err := tx.QueryRowContext(ctx, tenantLimitGetSQL, sql.Named("tenant", c.tenant)).Scan(&l.cap, &l.starts); err != nil {
				return nil, err
			}
			byTenant[c.tenant] = l
		}
		if _, ok := byAgent[c.agent]; !ok {
			var l limits
			if err := tx.QueryRowContext(ctx, agentLimitGetSQL, sql.Named("agent", c.agent)).Scan(&l.cap, &l.starts); err != nil {
				return nil, err
			}
			// Only a capped agent's running runs are counted: a claim
			// costs nothing more for agents without one.
			if l.cap > 0 {
				if err := tx.QueryRowContext(ctx, runAgentRunningSQL, sql.Named("agent", c.agent)).Scan(&l.running); err != nil {
					return nil, err
				}
			}
			byAgent[c.agent] = l
		}
	}
	for i, c := range cands {
		if !c.start {
			continue
		}
		if r := byTenant[c.tenant].starts; r > 0 {
			cands[i].startBuckets = append(cands[i].startBuckets, store.StartBucket("tenant", c.tenant, r))
		}
		if r := byAgent[c.agent].starts; r > 0 {
			cands[i].startBuckets = append(cands[i].startBuckets, store.StartBucket("agent", c.agent, r))
		}
	}
	running := make(map[string]int, len(byTenant))
	for t, l := range byTenant {
		running[t] = l.running
	}
	return withinCaps(fairOrder(cands, running), byTenant, byAgent), nil
}

// limits are a tenant's or an agent's caps, as a claim reads them: its
// runs running, its cap on them (0: none) and its start rate (0: none).
type limits struct {
	running, cap int
	starts       float64
}

// withinCaps drops the runs a claim would take beyond their tenant's cap
// on running runs (store.TenantLimiter) or their agent's
// (store.AgentLimiter), counting, for an agent, the runs taken before it
// in the claim's order: a run on an expired lease is running already and
// stays.
func withinCaps(cands []candidate, tenants, agents map[string]limits) []candidate {
	taken := map[string]int{}
	return slices.DeleteFunc(cands, func(c candidate) bool {
		if c.expired {
			return false
		}
		if tc := tenants[c.tenant].cap; tc > 0 && c.load >= tc {
			return true
		}
		if a := agents[c.agent]; a.cap > 0 {
			if a.running+taken[c.agent] >= a.cap {
				return true
			}
			taken[c.agent]++
		}
		return false
	})
}

// scanRows runs query and calls scan for each row.
func scanRows(ctx context.Context, tx *writeTx, query string, scan func(*sql.Rows) error, args ...any) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	for rows.Next() {
		if err := scan(rows); err != nil {
			rows.Close()
			return err
		}
	}
	return errors.Join(rows.Err(), rows.Close())
}

// fairOrder puts candidates in the order a claim takes them. Runs on an
// expired lease go first, oldest first. The others are taken in turns
// between tenants: each tenant's runs in its own order (higher priority,
// then older, first), the next run always from the tenant with the fewest
// runs running, counting those the claim takes before it; between tenants
// with as many, the run due first. A tenant with a deep backlog so never
// holds back another's first run for more than one claim.
func fairOrder(cands []candidate, running map[string]int) []candidate {
	slices.SortFunc(cands, func(a, b candidate) int {
		return cmp.Or(cmp.Compare(a.tenant, b.tenant), trueFirst(a.expired, b.expired),
			cmp.Compare(b.priority, a.priority), cmp.Compare(a.due, b.due), cmp.Compare(a.id, b.id))
	})
	for i := range cands {
		if i > 0 && cands[i].tenant == cands[i-1].tenant {
			cands[i].load = cands[i-1].load + 1
		} else {
			cands[i].load = running[cands[i].tenant]
		}
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		if a.expired || b.expired {
			return cmp.Or(trueFirst(a.expired, b.expired), cmp.Compare(a.due, b.due), cmp.Compare(a.id, b.id))
		}
		return cmp.Or(cmp.Compare(a.load, b.load), cmp.Compare(a.due, b.due), cmp.Compare(a.id, b.id))
	})
	return cands
}

// trueFirst orders true before false.
func trueFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}
