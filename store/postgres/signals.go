package postgres

import (
	"context"
	"errors"
	"fmt"

	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/signal_by_key.sql
	signalByKeySQL string
	//go:embed query/signal_insert.sql
	signalInsertSQL string
	//go:embed query/wait_consume_kept.sql
	waitConsumeKeptSQL string
)

// Signal sends a named event to a run, as the tenant, with the run's row
// locked first: it answers the run's oldest pending wait for it, or is
// kept for the wait to come.
func (s *Store) Signal(ctx context.Context, p store.SignalParams) (store.Signal, bool, error) {
	var (
		run      store.Run
		sent     store.Signal
		repeated bool
	)
	b := s.txBatch(p.Tenant)
	b.Queue(waitLockRunSQL, namedArgs{"id": p.RunID, "tenant": p.Tenant}).QueryRow(func(row pgx.Row) (err error) {
		run, err = sqlrow.Run(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		return err
	})
	err := s.inTx(ctx, b, func(tx pgx.Tx) error {
		if p.Key != "" {
			prev, err := sqlrow.Signal(tx.QueryRow(ctx, signalByKeySQL, namedArgs{"tenant": run.Tenant, "run_id": run.ID, "key": p.Key}))
			switch {
			case err == nil:
				sent, repeated = prev, true
				return p.Repeat(prev)
			case !errors.Is(err, pgx.ErrNoRows):
				return err
			}
		}
		if run.Status.Terminal() {
			return p.Ended(run)
		}
		sent = store.Signal{ID: p.ID, Tenant: run.Tenant, RunID: run.ID, Name: p.Name, Key: p.Key, Payload: p.Payload, CreatedAt: p.Now}
		w, err := sqlrow.Wait(tx.QueryRow(ctx, waitPendingSQL, namedArgs{"tenant": run.Tenant, "run_id": run.ID, "id": "",
			"kind": string(store.WaitEvent), "name": p.Name}))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		case w.ExpiresAt.After(p.Now):
			sent.ConsumedBy = w.ID
		}
		b := &pgx.Batch{}
		b.Queue(signalInsertSQL, namedArgs{"id": sent.ID, "tenant": sent.Tenant, "run_id": sent.RunID, "name": sent.Name,
			"key": sent.Key, "payload": []byte(sent.Payload), "now": sqlrow.Nanos(p.Now), "consumed_by": sent.ConsumedBy})
		if sent.ConsumedBy == "" {
			queueEvents(b, run.ID, store.SignalEvents(sent, run.Step, "", p.Now))
		} else {
			var answered store.Wait
			queueCloseWait(b, w, store.WaitAnswered, sent.Payload, "", store.SignalAnswerer, p.Now,
				store.SignalEvents(sent, w.Step, w.ID, p.Now), &answered)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return sent, repeated, fmt.Errorf("signal run %s: %w", p.RunID, err)
	}
	return sent, repeated, nil
}
