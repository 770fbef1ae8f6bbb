package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	_ "embed"

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
	//go:embed query/run_due.sql
	runDueSQL string
	//go:embed query/run_claim.sql
	runClaimSQL string
	//go:embed query/run_leased.sql
	runLeasedSQL string
	//go:embed query/run_take_over.sql
	runTakeOverSQL string
	//go:embed query/run_renew_lease.sql
	runRenewLeaseSQL string
)

// CreateRun inserts a queued run, or returns the existing run of the same
// (Tenant, User, ClientRequestID) with created false. Its events are written
// only with a new run.
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
	trace := eventsEntry(p.Now, p.Events)
	err = s.writer.do(ctx, eventBytes(p.Events), func(ctx context.Context, tx *writeTx) error {
		if p.ClientRequestID != "" {
			r, err := sqlrow.Run(tx.QueryRowContext(ctx, runGetByRequestSQL,
				sql.Named("tenant", p.Tenant),
				sql.Named("user", p.User),
				sql.Named("client_request_id", p.ClientRequestID),
			))
			if err == nil {
				run, created = r, false
				return nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		r, err := sqlrow.Run(tx.QueryRowContext(ctx, runInsertSQL,
			sql.Named("id", p.ID),
			sql.Named("tenant", p.Tenant),
			sql.Named("user", p.User),
			sql.Named("client_request_id", p.ClientRequestID),
			sql.Named("agent", p.Agent),
			sql.Named("agent_version", p.AgentVersion),
			sql.Named("input", p.Input),
			sql.Named("dry_run", p.DryRun),
			sql.Named("requested_by", p.RequestedBy),
			sql.Named("budget", []byte(p.Budget)),
			sql.Named("sensitive", sensitive),
			sql.Named("not_before", sqlrow.Nanos(p.NotBefore)),
			sql.Named("concurrency_key", p.ConcurrencyKey),
			sql.Named("concurrency_limit", p.RunConcurrencyLimit()),
			sql.Named("priority", p.Priority),
			sql.Named("now", sqlrow.Nanos(p.Now)),
		))
		if err != nil {
			return err
		}
		if err := appendEvents(ctx, tx, r.ID, trace); err != nil {
			return err
		}
		if err := raiseWakeup(ctx, tx); err != nil {
			return err
		}
		run, created = r, true
		return nil
	})
	if err != nil {
		return store.Run{}, false, fmt.Errorf("create run %s: %w", p.ID, err)
	}
	return run, created, nil
}

// GetRun returns a run of a tenant. An empty tenant matches any, for
// operator tools.
func (s *Store) GetRun(ctx context.Context, tenant, id string) (store.Run, error) {
	r, err := sqlrow.Run(s.read.QueryRowContext(ctx, runGetSQL,
		sql.Named("id", id),
		sql.Named("tenant", tenant),
	))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Run{}, fmt.Errorf("get run %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.Run{}, fmt.Errorf("get run %s: %w", id, err)
	}
	return r, nil
}

// ListRuns returns runs ordered by ID. An empty tenant matches any.
func (s *Store) ListRuns(ctx context.Context, p store.ListRunsParams) ([]store.Run, error) {
	limit := int64(p.Limit)
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	query := runListSQL
	if p.Newest {
		query = runListNewestSQL
	}
	runs, err := readAll(ctx, s.read, sqlrow.Run, query,
		sql.Named("tenant", p.Tenant),
		sql.Named("status", string(p.Status)),
		sql.Named("agent", p.Agent),
		sql.Named("user", p.User),
		sql.Named("since", sqlrow.Nanos(p.Since)),
		sql.Named("after", p.After),
		sql.Named("limit", limit),
	)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return runs, nil
}

// LeasedRuns returns running runs under a live lease, soonest to expire
// first.
func (s *Store) LeasedRuns(ctx context.Context, p store.LeasedRunsParams) ([]store.Run, error) {
	runs, err := readAll(ctx, s.read, sqlrow.Run, runLeasedSQL,
		sql.Named("now", sqlrow.Nanos(p.Now)), sql.Named("limit", int64(max(p.Limit, 0))))
	if err != nil {
		return nil, fmt.Errorf("leased runs: %w", err)
	}
	return runs, nil
}

// ClaimRuns leases up to Limit due runs to an owner, in the order
// fairOrder gives them.
func (s *Store) ClaimRuns(ctx context.Context, p store.ClaimRunsParams) ([]store.Run, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	agents := ""
	if len(p.Agents) > 0 {
		b, err := json.Marshal(p.Agents)
		if err != nil {
			return nil, fmt.Errorf("claim runs: %w", err)
		}
		agents = string(b)
	}
	var runs []store.Run
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		runs = runs[:0]
		// A run whose concurrency key filled up earlier in this claim is
		// passed over; the runs due after it are then read again, the full
		// key's runs no longer among them.
		for len(runs) < p.Limit {
			due, err := dueRuns(ctx, tx, p, agents, p.Limit-len(runs))
			if err != nil {
				return err
			}
			passed := false
			for _, c := range due {
				if len(runs) == p.Limit {
					break
				}
				// A start its tenant's or its agent's start rate has no
				// room for waits for a later claim. It does not make the
				// claim read again: the same runs would come back.
				var next []store.Bucket
				if len(c.startBuckets) > 0 {
					answer, n, err := askBuckets(ctx, tx, store.TakeFromBucketsParams{Now: p.Now, Takes: c.startBuckets})
					if err != nil {
						return err
					}
					if !answer.Admitted {
						continue
					}
					next = n
				}
				r, err := sqlrow.Run(tx.QueryRowContext(ctx, runClaimSQL,
					sql.Named("id", c.id),
					sql.Named("owner", p.Owner),
					sql.Named("expires", sqlrow.Nanos(p.Now.Add(p.TTL))),
					sql.Named("now", sqlrow.Nanos(p.Now)),
				))
				if errors.Is(err, sql.ErrNoRows) {
					passed = true
					continue
				}
				if err != nil {
					return err
				}
				if err := putBuckets(ctx, tx, next); err != nil {
					return err
				}
				r.TakenFrom = c.takenFrom
				runs = append(runs, r)
			}
			if !passed {
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim runs: %w", err)
	}
	return runs, nil
}

// TakeOver leases a running run to a new owner if it is still at p.Epoch.
func (s *Store) TakeOver(ctx context.Context, p store.TakeOverParams) (store.Run, error) {
	var run store.Run
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		r, err := sqlrow.Run(tx.QueryRowContext(ctx, runTakeOverSQL,
			sql.Named("id", p.RunID),
			sql.Named("epoch", p.Epoch),
			sql.Named("owner", p.Owner),
			sql.Named("expires", sqlrow.Nanos(p.Now.Add(p.TTL))),
			sql.Named("now", sqlrow.Nanos(p.Now)),
		))
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrLeaseLost
		}
		run = r
		return err
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("take over run %s: %w", p.RunID, err)
	}
	return run, nil
}

// RenewLease moves the lease's expiry to expires.
func (s *Store) RenewLease(ctx context.Context, f store.Fence, expires time.Time) error {
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, runRenewLeaseSQL,
			sql.Named("id", f.RunID),
			sql.Named("owner", f.Owner),
			sql.Named("epoch", f.Epoch),
			sql.Named("expires", sqlrow.Nanos(expires)),
		)
		if err != nil {
			return err
		}
		return mustAffect(res)
	})
	if err != nil {
		return fmt.Errorf("renew lease of run %s: %w", f.RunID, err)
	}
	return nil
}

// mustAffect turns a fenced statement that matched no row into ErrLeaseLost.
func mustAffect(res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrLeaseLost
	}
	return nil
}
