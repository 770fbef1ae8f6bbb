package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/run_fence_share.sql
	runFenceShareSQL string
	//go:embed query/effect_insert.sql
	effectInsertSQL string
	//go:embed query/effect_lock.sql
	effectLockSQL string
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
// the run's lease, as the effect's tenant. A new intent starts pending at
// attempt 1. An existing key with the same arguments is returned with
// existed true and left as it is; a failed key begins again. The events are
// written whenever the call succeeds.
//
// The run's row is locked with the fence check (and the lease renewed with
// it when asked), so no claim lands between the check and the commit: the
// intent is written under a lease that is still held.
func (s *Store) BeginEffect(ctx context.Context, p store.BeginEffectParams) (store.Effect, bool, error) {
	in := p.Effect
	var (
		effect  store.Effect
		existed bool
		fresh   bool
	)
	b := s.txBatch(in.Tenant)
	queueFence(b, p.Fence, p.LeaseExpires)
	b.Queue(effectInsertSQL, namedArgs{
		"tenant":          in.Tenant,
		"key":             in.Key,
		"run_id":          p.Fence.RunID,
		"tool":            in.Tool,
		"args_hash":       in.ArgsHash,
		"args":            []byte(in.Args),
		"result":          []byte(in.Result),
		"step":            in.Step,
		"epoch":           p.Fence.Epoch,
		"in_flight_until": sqlrow.Nanos(in.InFlightUntil),
		"now":             sqlrow.Nanos(p.Now),
	}).QueryRow(func(row pgx.Row) error {
		e, err := sqlrow.Effect(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		effect, fresh = e, err == nil
		return err
	})
	err := s.inTx(ctx, b, func(tx pgx.Tx) error {
		if !fresh {
			var err error
			effect, existed, err = beginExisting(ctx, tx, p)
			if err != nil {
				return err
			}
		}
		return s.appendEvents(ctx, tx, p.Fence.RunID, p.Events)
	})
	if err != nil {
		return store.Effect{}, false, fmt.Errorf("begin effect %s: %w", in.Key, err)
	}
	return effect, existed, nil
}

// beginExisting begins a key the ledger has, locking its row first.
func beginExisting(ctx context.Context, tx pgx.Tx, p store.BeginEffectParams) (store.Effect, bool, error) {
	in := p.Effect
	key := namedArgs{"tenant": in.Tenant, "key": in.Key}
	cur, err := sqlrow.Effect(tx.QueryRow(ctx, effectLockSQL, key))
	if err == nil {
		err = p.Check(cur)
	}
	switch {
	case err != nil:
		return store.Effect{}, false, err
	case cur.State == store.EffectFailed:
		e, err := sqlrow.Effect(tx.QueryRow(ctx, effectRestartSQL, namedArgs{
			"tenant": in.Tenant, "key": in.Key, "step": in.Step, "epoch": p.Fence.Epoch,
			"in_flight_until": sqlrow.Nanos(in.InFlightUntil), "now": sqlrow.Nanos(p.Now),
		}))
		return e, false, err
	default:
		return cur, true, nil
	}
}

// StartAttempt records one more call under a key whose outcome is not
// known, under the run's lease, as the run's tenant.
func (s *Store) StartAttempt(ctx context.Context, p store.StartAttemptParams) (store.Effect, error) {
	var effect store.Effect
	b := s.txBatch(p.Tenant)
	queueFence(b, p.Fence, p.LeaseExpires)
	b.Queue(effectAttemptSQL, namedArgs{
		"tenant": p.Tenant, "key": p.Key, "epoch": p.Fence.Epoch,
		"in_flight_until": sqlrow.Nanos(p.InFlightUntil), "now": sqlrow.Nanos(p.Now),
	}).QueryRow(func(row pgx.Row) error {
		e, err := sqlrow.Effect(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNoIntent
		}
		effect = e
		return err
	})
	err := s.inTx(ctx, b, func(tx pgx.Tx) error {
		return s.appendEvents(ctx, tx, p.Fence.RunID, p.Events)
	})
	if err != nil {
		return store.Effect{}, fmt.Errorf("start attempt %s: %w", p.Key, err)
	}
	return effect, nil
}

// EndCalls records that the last calls under keys have returned, under the
// run's lease, as the run's tenant.
func (s *Store) EndCalls(ctx context.Context, p store.EndCallsParams) error {
	b := s.txBatch(p.Tenant)
	queueFence(b, p.Fence, time.Time{})
	for _, key := range p.Keys {
		b.Queue(effectEndCallSQL, namedArgs{"tenant": p.Tenant, "key": key, "now": sqlrow.Nanos(p.Now)})
	}
	if err := s.inTx(ctx, b, nil); err != nil {
		return fmt.Errorf("end calls of run %s: %w", p.Fence.RunID, err)
	}
	return nil
}

// queueFence queues the fence of a write that precedes a call, renewing the
// lease when expires is set.
func queueFence(b *pgx.Batch, f store.Fence, expires time.Time) {
	if expires.IsZero() {
		b.Queue(runFenceShareSQL, namedArgs{"id": f.RunID, "owner": f.Owner, "epoch": f.Epoch})
		return
	}
	b.Queue(runFenceRenewSQL, namedArgs{"id": f.RunID, "owner": f.Owner, "epoch": f.Epoch, "expires": sqlrow.Nanos(expires)})
}

// appendEvents writes events in the transaction, if there are any.
func (s *Store) appendEvents(ctx context.Context, tx pgx.Tx, runID string, events []store.Event) error {
	if len(events) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	queueEvents(b, runID, events)
	return tx.SendBatch(ctx, b).Close()
}

// Effects returns the ledger rows of a run in the order they were begun. An
// empty tenant matches any.
func (s *Store) Effects(ctx context.Context, tenant, runID string) ([]store.Effect, error) {
	var es []store.Effect
	b := s.batch(tenant)
	b.Queue(effectListSQL, namedArgs{"tenant": tenant, "run_id": runID}).Query(collect(&es, sqlrow.Effect))
	if err := s.send(ctx, b); err != nil {
		return nil, fmt.Errorf("effects of run %s: %w", runID, err)
	}
	return es, nil
}

// queueSettles records outcomes, one statement each. Settling a key that was
// never begun raises, failing the transaction with store.ErrNotFound.
func queueSettles(b *pgx.Batch, now time.Time, us []store.EffectUpdate) {
	for _, u := range us {
		b.Queue(effectSettleSQL, namedArgs{
			"tenant": u.Tenant,
			"key":    u.Key,
			"state":  string(u.State),
			"result": []byte(u.Result),
			"now":    sqlrow.Nanos(now),
		})
	}
}
