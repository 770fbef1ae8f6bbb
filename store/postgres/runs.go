package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/run_insert.sql
	runInsertSQL string
	//go:embed query/run_get.sql
	runGetSQL string
	//go:embed query/run_get_by_request.sql
	runGetByRequestSQL string
	//go:embed query/run_list.sql
	runListSQL string
	//go:embed query/run_list_newest.sql
	runListNewestSQL string
	//go:embed query/run_claim_keys.sql
	runClaimKeysSQL string
	//go:embed query/run_claim.sql
	runClaimSQL string
	//go:embed query/run_claim_plan.sql
	runClaimPlanSQL string
	//go:embed query/run_leased.sql
	runLeasedSQL string
	//go:embed query/run_take_over.sql
	runTakeOverSQL string
	//go:embed query/run_renew_lease.sql
	runRenewLeaseSQL string
	//go:embed query/run_wakeup.sql
	runWakeupSQL string
	//go:embed query/run_wakeup_key.sql
	runWakeupKeySQL string
)

// CreateRun inserts a queued run, or returns the existing run of the same
// (Tenant, User, ClientRequestID) with created false. Its events are written,
// and idle workers woken, only with a new run. It runs as the run's tenant.
func (s *Store) CreateRun(ctx context.Context, p store.CreateRunParams) (store.Run, bool, error) {
	if err := p.Check(); err != nil {
		return store.Run{}, false, fmt.Errorf("create run: %w", err)
	}
	sensitive, err := sqlrow.EncodeSensitive(p.Sensitive)
	if err != nil {
		return store.Run{}, false, fmt.Errorf("create run %s: %w", p.ID, err)
	}
	var (
		run     store.Run
		created bool
	)
	b := s.txBatch(p.Tenant)
	b.Queue(runInsertSQL, namedArgs{
		"id":                p.ID,
		"tenant":            p.Tenant,
		"user":              p.User,
		"client_request_id": p.ClientRequestID,
		"agent":             p.Agent,
		"agent_version":     p.AgentVersion,
		"input":             p.Input,
		"dry_run":           p.DryRun,
		"requested_by":      p.RequestedBy,
		"budget":            []byte(p.Budget),
		"sensitive":         sensitive,
		"not_before":        sqlrow.Nanos(p.NotBefore),
		"concurrency_key":   p.ConcurrencyKey,
		"concurrency_limit": p.RunConcurrencyLimit(),
		"priority":          p.Priority,
		"now":               sqlrow.Nanos(p.Now),
	}).QueryRow(func(row pgx.Row) error {
		r, err := sqlrow.Run(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		run, created = r, err == nil
		return err
	})
	err = s.inTx(ctx, b, func(tx pgx.Tx) error {
		if !created {
			// The insert met a run of the same request, committed by now.
			r, err := sqlrow.Run(tx.QueryRow(ctx, runGetByRequestSQL, namedArgs{
				"tenant":            p.Tenant,
				"user":              p.User,
				"client_request_id": p.ClientRequestID,
			}))
			run = r
			return err
		}
		b := &pgx.Batch{}
		queueEvents(b, p.ID, p.Events)
		b.Queue(runWakeupSQL, namedArgs{"id": p.ID})
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return store.Run{}, false, fmt.Errorf("create run %s: %w", p.ID, err)
	}
	return run, created, nil
}

// GetRun returns a run of a tenant. An empty tenant matches any, for
// operator tools.
func (s *Store) GetRun(ctx context.Context, tenant, id string) (store.Run, error) {
	var run store.Run
	b := s.batch(tenant)
	b.Queue(runGetSQL, namedArgs{"id": id, "tenant": tenant}).QueryRow(func(row pgx.Row) error {
		r, err := sqlrow.Run(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		run = r
		return err
	})
	if err := s.send(ctx, b); err != nil {
		return store.Run{}, fmt.Errorf("get run %s: %w", id, err)
	}
	return run, nil
}

// ListRuns returns runs ordered by ID. An empty tenant matches any.
func (s *Store) ListRuns(ctx context.Context, p store.ListRunsParams) ([]store.Run, error) {
	var limit any // null: no limit
	if p.Limit > 0 {
		limit = p.Limit
	}
	var runs []store.Run
	query := runListSQL
	if p.Newest {
		query = runListNewestSQL
	}
	b := s.batch(p.Tenant)
	b.Queue(query, namedArgs{
		"tenant": p.Tenant,
		"status": string(p.Status),
		"agent":  p.Agent,
		"user":   p.User,
		"since":  sqlrow.Nanos(p.Since),
		"after":  p.After,
		"limit":  limit,
	}).Query(collect(&runs, sqlrow.Run))
	if err := s.send(ctx, b); err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return runs, nil
}

// LeasedRuns returns running runs under a live lease, soonest to expire
// first, over every tenant.
func (s *Store) LeasedRuns(ctx context.Context, p store.LeasedRunsParams) ([]store.Run, error) {
	var runs []store.Run
	b := s.batch("")
	b.Queue(runLeasedSQL, namedArgs{"now": sqlrow.Nanos(p.Now), "limit": max(p.Limit, 0)}).Query(collect(&runs, sqlrow.Run))
	if err := s.send(ctx, b); err != nil {
		return nil, fmt.Errorf("leased runs: %w", err)
	}
	return runs, nil
}

// ClaimRuns leases up to Limit due runs to an owner, oldest update first, in
// one statement. Runs another claim has locked are skipped, so that workers
// claiming at once never take the same run and never wait for each other.
func (s *Store) ClaimRuns(ctx context.Context, p store.ClaimRunsParams) ([]store.Run, error) {
	var runs []store.Run
	for len(runs) < p.Limit {
		var got []store.Run
		b := &pgx.Batch{}
		b.Queue(runClaimPlanSQL)
		b.Queue(runClaimKeysSQL)
		b.Queue(runClaimSQL, namedArgs{
			"owner":   p.Owner,
			"now":     sqlrow.Nanos(p.Now),
			"expires": sqlrow.Nanos(p.Now.Add(p.TTL)),
			"limit":   p.Limit - len(runs),
			"agents":  append([]string{}, p.Agents...),
		}).Query(collect(&got, sqlrow.ClaimedRun))
		if err := s.send(ctx, b); err != nil {
			return nil, fmt.Errorf("claim runs: %w", err)
		}
		runs = append(runs, got...)
		// A claim that took a keyed run may have passed over others of its
		// key, which had no room, for runs due after them: claim again for
		// the places they left. Otherwise a short claim means nothing more
		// is due.
		if !slices.ContainsFunc(got, func(r store.Run) bool { return r.ConcurrencyKey != "" }) {
			break
		}
	}
	return runs, nil
}

// TakeOver leases a running run to a new owner if it is still at p.Epoch.
func (s *Store) TakeOver(ctx context.Context, p store.TakeOverParams) (store.Run, error) {
	r, err := sqlrow.Run(s.pool.QueryRow(ctx, runTakeOverSQL, namedArgs{
		"id":      p.RunID,
		"epoch":   p.Epoch,
		"owner":   p.Owner,
		"expires": sqlrow.Nanos(p.Now.Add(p.TTL)),
		"now":     sqlrow.Nanos(p.Now),
	}))
	if errors.Is(err, pgx.ErrNoRows) {
		err = store.ErrLeaseLost
	}
	if err != nil {
		return store.Run{}, fmt.Errorf("take over run %s: %w", p.RunID, err)
	}
	return r, nil
}

// RenewLease moves the lease's expiry to expires.
func (s *Store) RenewLease(ctx context.Context, f store.Fence, expires time.Time) error {
	tag, err := s.pool.Exec(ctx, runRenewLeaseSQL, namedArgs{
		"id":      f.RunID,
		"owner":   f.Owner,
		"epoch":   f.Epoch,
		"expires": sqlrow.Nanos(expires),
	})
	if err == nil && tag.RowsAffected() == 0 {
		err = store.ErrLeaseLost
	}
	if err != nil {
		return fmt.Errorf("renew lease of run %s: %w", f.RunID, err)
	}
	return nil
}
