package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/store"
)

var (
	//go:embed query/run_fence_share.sql
	runFenceShareSQL string
	//go:embed query/effect_insert.sql
	effectInsertSQL string
	//go:embed query/effect_lock.sql
	effectLockSQL string
	//go:embed query/effect_retry.sql
	effectRetrySQL string
	//go:embed query/effect_restart.sql
	effectRestartSQL string
	//go:embed query/effect_settle.sql
	effectSettleSQL string
	//go:embed query/effect_list.sql
	effectListSQL string
)

// BeginEffect records the intent of a side effect under the run's lease, as
// the effect's tenant. A new intent starts pending at attempt 1. An existing
// key with the same arguments is returned with existed true; if its outcome
// is not known yet its attempts grow by one, since the caller is about to
// call again. A failed key begins again. The events are written whenever the
// call succeeds.
//
// The run's row is share-locked with the fence check, so no claim lands
// between the check and the commit: the intent is written under a lease that
// is still held.
func (s *Store) BeginEffect(ctx context.Context, p store.BeginEffectParams) (store.Effect, bool, error) {
	in := p.Effect
	var (
		effect  store.Effect
		existed bool
		fresh   bool
	)
	b := s.txBatch(in.Tenant)
	b.Queue(runFenceShareSQL, namedArgs{"id": p.Fence.RunID, "owner": p.Fence.Owner, "epoch": p.Fence.Epoch})
	b.Queue(effectInsertSQL, namedArgs{
		"tenant":    in.Tenant,
		"key":       in.Key,
		"run_id":    p.Fence.RunID,
		"tool":      in.Tool,
		"args_hash": in.ArgsHash,
		"args":      []byte(in.Args),
		"result":    []byte(in.Result),
		"step":      in.Step,
		"now":       nanos(p.Now),
	}).QueryRow(func(row pgx.Row) error {
		e, err := scanEffect(row)
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
		if len(p.Events) == 0 {
			return nil
		}
		b := &pgx.Batch{}
		queueEvents(b, p.Fence.RunID, p.Events)
		return tx.SendBatch(ctx, b).Close()
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
	cur, err := scanEffect(tx.QueryRow(ctx, effectLockSQL, key))
	switch {
	case err != nil:
		return store.Effect{}, false, err
	case cur.ArgsHash != in.ArgsHash:
		return store.Effect{}, false, fmt.Errorf("key %q: %w", in.Key, store.ErrEffectConflict)
	case cur.State == store.EffectDone:
		return cur, true, nil
	case cur.State == store.EffectFailed:
		e, err := scanEffect(tx.QueryRow(ctx, effectRestartSQL, namedArgs{
			"tenant": in.Tenant, "key": in.Key, "step": in.Step, "now": nanos(p.Now),
		}))
		return e, false, err
	default:
		e, err := scanEffect(tx.QueryRow(ctx, effectRetrySQL, namedArgs{
			"tenant": in.Tenant, "key": in.Key, "now": nanos(p.Now),
		}))
		return e, true, err
	}
}

// Effects returns the ledger rows of a run in the order they were begun. An
// empty tenant matches any.
func (s *Store) Effects(ctx context.Context, tenant, runID string) ([]store.Effect, error) {
	var es []store.Effect
	b := s.batch(tenant)
	b.Queue(effectListSQL, namedArgs{"tenant": tenant, "run_id": runID}).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			e, err := scanEffect(rows)
			if err != nil {
				return err
			}
			es = append(es, e)
		}
		return rows.Err()
	})
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
			"now":    nanos(now),
		})
	}
}

// scanEffect reads the columns every effect query selects, in their order.
func scanEffect(row pgx.Row) (store.Effect, error) {
	var (
		e           store.Effect
		created, up int64
	)
	err := row.Scan(
		&e.Tenant, &e.Key, &e.RunID, &e.Tool, &e.ArgsHash, (*[]byte)(&e.Args),
		(*string)(&e.State), (*[]byte)(&e.Result), &e.Step, &e.Attempts, &created, &up,
	)
	if err != nil {
		return store.Effect{}, err
	}
	e.CreatedAt = fromNanos(created)
	e.UpdatedAt = fromNanos(up)
	return e, nil
}
