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
	//go:embed query/run_fenced.sql
	runFencedSQL string
	//go:embed query/effect_get.sql
	effectGetSQL string
	//go:embed query/effect_insert.sql
	effectInsertSQL string
	//go:embed query/run_fence_renew.sql
	runFenceRenewSQL string
	//go:embed query/effect_attempt.sql
	effectAttemptSQL string
	//go:embed query/effect_end_call.sql
	effectEndCallSQL string
	//go:embed query/effect_restart.sql
	effectRestartSQL string
	//go:embed query/effect_settle.sql
	effectSettleSQL string
	//go:embed query/effect_list.sql
	effectListSQL string
)

// BeginEffect records the intent of a side effect and its first call under
// the run's lease. A new intent starts pending at attempt 1. An existing key
// with the same arguments is returned with existed true and left as it is;
// a failed one begins again. The events are written whenever the call
// succeeds.
func (s *Store) BeginEffect(ctx context.Context, p store.BeginEffectParams) (store.Effect, bool, error) {
	in := p.Effect
	var (
		effect  store.Effect
		existed bool
	)
	bytes := int64(len(in.Args)+len(in.Result)) + eventBytes(p.Events)
	trace := eventsEntry(p.Now, p.Events)
	err := s.writer.do(ctx, bytes, func(ctx context.Context, tx *writeTx) error {
		// A batch the writer runs again runs this again: what the first
		// run found may have changed.
		effect, existed = store.Effect{}, false
		if err := fenceCall(ctx, tx, p.Fence, p.LeaseExpires); err != nil {
			return err
		}
		cur, err := sqlrow.Effect(tx.QueryRowContext(ctx, effectGetSQL,
			sql.Named("tenant", in.Tenant),
			sql.Named("key", in.Key),
		))
		if err == nil {
			err = p.Check(cur)
		}
		switch {
		case errors.Is(err, sql.ErrNoRows):
			effect, err = sqlrow.Effect(tx.QueryRowContext(ctx, effectInsertSQL,
				sql.Named("tenant", in.Tenant),
				sql.Named("key", in.Key),
				sql.Named("run_id", p.Fence.RunID),
				sql.Named("tool", in.Tool),
				sql.Named("args_hash", in.ArgsHash),
				sql.Named("args", []byte(in.Args)),
				sql.Named("result", []byte(in.Result)),
				sql.Named("step", in.Step),
				sql.Named("epoch", p.Fence.Epoch),
				sql.Named("in_flight_until", sqlrow.Nanos(in.InFlightUntil)),
				sql.Named("now", sqlrow.Nanos(p.Now)),
			))
		case err != nil:
			return err
		case cur.State == store.EffectFailed:
			effect, err = sqlrow.Effect(tx.QueryRowContext(ctx, effectRestartSQL,
				sql.Named("tenant", in.Tenant),
				sql.Named("key", in.Key),
				sql.Named("step", in.Step),
				sql.Named("epoch", p.Fence.Epoch),
				sql.Named("in_flight_until", sqlrow.Nanos(in.InFlightUntil)),
				sql.Named("now", sqlrow.Nanos(p.Now)),
			))
		default:
			effect, existed = cur, true
		}
		if err != nil {
			return err
		}
		return appendEvents(ctx, tx, p.Fence.RunID, trace)
	})
	if err != nil {
		return store.Effect{}, false, fmt.Errorf("begin effect %s: %w", in.Key, err)
	}
	return effect, existed, nil
}

// StartAttempt records one more call under a key whose outcome is not
// known, under the run's lease.
func (s *Store) StartAttempt(ctx context.Context, p store.StartAttemptParams) (store.Effect, error) {
	var effect store.Effect
	trace := eventsEntry(p.Now, p.Events)
	err := s.writer.do(ctx, eventBytes(p.Events), func(ctx context.Context, tx *writeTx) error {
		if err := fenceCall(ctx, tx, p.Fence, p.LeaseExpires); err != nil {
			return err
		}
		var err error
		effect, err = sqlrow.Effect(tx.QueryRowContext(ctx, effectAttemptSQL,
			sql.Named("tenant", p.Tenant),
			sql.Named("key", p.Key),
			sql.Named("epoch", p.Fence.Epoch),
			sql.Named("in_flight_until", sqlrow.Nanos(p.InFlightUntil)),
			sql.Named("now", sqlrow.Nanos(p.Now)),
		))
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNoIntent
		}
		if err != nil {
			return err
		}
		return appendEvents(ctx, tx, p.Fence.RunID, trace)
	})
	if err != nil {
		return store.Effect{}, fmt.Errorf("start attempt %s: %w", p.Key, err)
	}
	return effect, nil
}

// EndCalls records that the last calls under keys have returned, under the
// run's lease.
func (s *Store) EndCalls(ctx context.Context, p store.EndCallsParams) error {
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		if err := fenceCall(ctx, tx, p.Fence, time.Time{}); err != nil {
			return err
		}
		for _, key := range p.Keys {
			if _, err := tx.ExecContext(ctx, effectEndCallSQL,
				sql.Named("tenant", p.Tenant), sql.Named("key", key), sql.Named("now", sqlrow.Nanos(p.Now))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("end calls of run %s: %w", p.Fence.RunID, err)
	}
	return nil
}

// fenceCall checks the fence of a write that precedes a call and, when
// expires is set, renews the lease with it.
func fenceCall(ctx context.Context, tx *writeTx, f store.Fence, expires time.Time) error {
	if !expires.IsZero() {
		res, err := tx.ExecContext(ctx, runFenceRenewSQL,
			sql.Named("id", f.RunID),
			sql.Named("owner", f.Owner),
			sql.Named("epoch", f.Epoch),
			sql.Named("expires", sqlrow.Nanos(expires)),
		)
		if err != nil {
			return err
		}
		return mustAffect(res)
	}
	var fenced int
	err := tx.QueryRowContext(ctx, runFencedSQL,
		sql.Named("id", f.RunID),
		sql.Named("owner", f.Owner),
		sql.Named("epoch", f.Epoch),
	).Scan(&fenced)
	if err != nil {
		return err
	}
	if fenced == 0 {
		return store.ErrLeaseLost
	}
	return nil
}

// Effects returns the ledger rows of a run in the order they were begun. An
// empty tenant matches any.
func (s *Store) Effects(ctx context.Context, tenant, runID string) ([]store.Effect, error) {
	es, err := readAll(ctx, s.read, sqlrow.Effect, effectListSQL,
		sql.Named("tenant", tenant),
		sql.Named("run_id", runID),
	)
	if err != nil {
		return nil, fmt.Errorf("effects of run %s: %w", runID, err)
	}
	return es, nil
}

// settleEffects records outcomes. Settling a key that was never begun is an
// error: its intent would be missing from the ledger.
func settleEffects(ctx context.Context, tx *writeTx, now time.Time, us []store.EffectUpdate) error {
	for _, u := range us {
		res, err := tx.ExecContext(ctx, effectSettleSQL,
			sql.Named("tenant", u.Tenant),
			sql.Named("key", u.Key),
			sql.Named("state", string(u.State)),
			sql.Named("result", []byte(u.Result)),
			sql.Named("now", sqlrow.Nanos(now)),
		)
		if err != nil {
			return fmt.Errorf("settle effect %s: %w", u.Key, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("settle effect %s: %w", u.Key, err)
		}
		if n == 0 {
			return fmt.Errorf("settle effect %s: %w", u.Key, store.ErrNotFound)
		}
	}
	return nil
}
