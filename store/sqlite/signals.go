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
	//go:embed query/signal_by_key.sql
	signalByKeySQL string
	//go:embed query/signal_insert.sql
	signalInsertSQL string
	//go:embed query/signal_kept.sql
	signalKeptSQL string
	//go:embed query/signal_consume.sql
	signalConsumeSQL string
)

// Signal sends a named event to a run in the writer's transaction: it
// answers the run's oldest pending wait for it, or is kept for the wait to
// come.
func (s *Store) Signal(ctx context.Context, p store.SignalParams) (store.Signal, bool, error) {
	var (
		sent     store.Signal
		repeated bool
	)
	err := s.writer.do(ctx, int64(len(p.Payload)), func(ctx context.Context, tx *writeTx) error {
		repeated = false
		run, err := sqlrow.Run(tx.QueryRowContext(ctx, runGetSQL, sql.Named("id", p.RunID), sql.Named("tenant", p.Tenant)))
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if p.Key != "" {
			prev, err := sqlrow.Signal(tx.QueryRowContext(ctx, signalByKeySQL, sql.Named("run_id", run.ID), sql.Named("key", p.Key)))
			switch {
			case err == nil:
				sent, repeated = prev, true
				return p.Repeat(prev)
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		if run.Status.Terminal() {
			return p.Ended(run)
		}
		sent = store.Signal{ID: p.ID, Tenant: run.Tenant, RunID: run.ID, Name: p.Name, Key: p.Key, Payload: p.Payload, CreatedAt: p.Now}
		w, err := sqlrow.Wait(tx.QueryRowContext(ctx, waitPendingSQL, sql.Named("run_id", run.ID), sql.Named("id", ""),
			sql.Named("kind", string(store.WaitEvent)), sql.Named("name", p.Name)))
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		case w.ExpiresAt.After(p.Now):
			sent.ConsumedBy = w.ID
		}
		if _, err := tx.ExecContext(ctx, signalInsertSQL,
			sql.Named("id", sent.ID), sql.Named("tenant", sent.Tenant), sql.Named("run_id", sent.RunID),
			sql.Named("name", sent.Name), sql.Named("key", sent.Key), sql.Named("payload", []byte(sent.Payload)),
			sql.Named("now", sqlrow.Nanos(p.Now)), sql.Named("consumed_by", sent.ConsumedBy)); err != nil {
			return err
		}
		if sent.ConsumedBy == "" {
			return appendEvents(ctx, tx, run.ID, eventsEntry(p.Now, store.SignalEvents(sent, run.Step, "", p.Now)))
		}
		_, err = closeWait(ctx, tx, w, store.WaitAnswered, sent.Payload, "", store.SignalAnswerer, p.Now,
			eventsEntry(p.Now, store.SignalEvents(sent, w.Step, w.ID, p.Now)))
		return err
	})
	if err != nil {
		return sent, repeated, fmt.Errorf("signal run %s: %w", p.RunID, err)
	}
	return sent, repeated, nil
}

// consumeKept answers an event wait a checkpoint has just inserted with
// the oldest signal of its name the run kept, if there is one, and queues
// the run the checkpoint made wait.
func consumeKept(ctx context.Context, tx *writeTx, runID string, w store.Wait, now time.Time) error {
	kept, err := sqlrow.Signal(tx.QueryRowContext(ctx, signalKeptSQL, sql.Named("run_id", runID), sql.Named("name", w.Name)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	cur, err := sqlrow.Wait(tx.QueryRowContext(ctx, waitPendingSQL, sql.Named("run_id", runID), sql.Named("id", w.ID),
		sql.Named("kind", string(store.WaitEvent)), sql.Named("name", w.Name)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil // the wait existed already, from a step run again: it is not this one
	}
	if err != nil {
		return err
	}
	if _, err := closeWait(ctx, tx, cur, store.WaitAnswered, kept.Payload, "", store.SignalAnswerer, now, sqlrow.JournalEntry{}); err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, signalConsumeSQL, sql.Named("id", kept.ID), sql.Named("wait_id", cur.ID))
	return err
}
