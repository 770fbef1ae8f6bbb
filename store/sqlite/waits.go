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

var _ store.Waiter = (*Store)(nil)

var (
	//go:embed query/wait_insert.sql
	waitInsertSQL string
	//go:embed query/wait_list.sql
	waitListSQL string
	//go:embed query/wait_list_run.sql
	waitListRunSQL string
	//go:embed query/wait_by_key.sql
	waitByKeySQL string
	//go:embed query/wait_pending.sql
	waitPendingSQL string
	//go:embed query/wait_latest.sql
	waitLatestSQL string
	//go:embed query/wait_answer.sql
	waitAnswerSQL string
	//go:embed query/wait_due.sql
	waitDueSQL string
	//go:embed query/run_wake_answered.sql
	runWakeAnsweredSQL string
	//go:embed query/wait_cancel_run.sql
	waitCancelRunSQL string
)

// insertWaits inserts a checkpoint's waits pending; one that exists for the
// same (tenant, run, tool use) is kept as it is.
func insertWaits(ctx context.Context, tx *writeTx, runID string, now time.Time, ws []store.Wait) error {
	for _, w := range ws {
		if _, err := tx.ExecContext(ctx, waitInsertSQL,
			sql.Named("id", w.ID),
			sql.Named("run_id", runID),
			sql.Named("step", w.Step),
			sql.Named("tool_use_id", w.ToolUseID),
			sql.Named("kind", string(w.Kind)),
			sql.Named("name", w.Name),
			sql.Named("prompt", []byte(w.Prompt)),
			sql.Named("binding", w.Binding),
			sql.Named("expires_at", sqlrow.Nanos(w.ExpiresAt)),
			sql.Named("now", sqlrow.Nanos(now)),
		); err != nil {
			return fmt.Errorf("wait for %s: %w", w.Name, err)
		}
		if w.Kind == store.WaitEvent {
			if err := consumeKept(ctx, tx, runID, w, now); err != nil {
				return fmt.Errorf("wait for %s: %w", w.Name, err)
			}
		}
	}
	return nil
}

// Waits returns waits in creation order.
func (s *Store) Waits(ctx context.Context, p store.ListWaitsParams) ([]store.Wait, error) {
	limit := int64(p.Limit)
	if limit <= 0 {
		limit = -1
	}
	query := waitListSQL
	if p.RunID != "" {
		query = waitListRunSQL
	}
	ws, err := readAll(ctx, s.read, sqlrow.Wait, query,
		sql.Named("tenant", p.Tenant),
		sql.Named("run_id", p.RunID),
		sql.Named("status", string(p.Status)),
		sql.Named("kinds", p.KindList()),
		sql.Named("after", p.After),
		sql.Named("limit", limit),
	)
	if err != nil {
		return nil, fmt.Errorf("list waits: %w", err)
	}
	return ws, nil
}

// AnswerWait records an answer once, in the writer's transaction, and
// queues the run when nothing of it is pending any more.
func (s *Store) AnswerWait(ctx context.Context, p store.AnswerWaitParams) (store.Wait, bool, error) {
	var (
		answered store.Wait
		repeated bool
	)
	trace := eventsEntry(p.Now, p.Events)
	err := s.writer.do(ctx, eventBytes(p.Events)+int64(len(p.Answer)), func(ctx context.Context, tx *writeTx) error {
		repeated = false
		run, err := sqlrow.Run(tx.QueryRowContext(ctx, runGetSQL, sql.Named("id", p.RunID), sql.Named("tenant", p.Tenant)))
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if p.Key != "" {
			prev, err := sqlrow.Wait(tx.QueryRowContext(ctx, waitByKeySQL, sql.Named("run_id", p.RunID), sql.Named("key", p.Key)))
			switch {
			case err == nil:
				answered, repeated = prev, true
				return p.Repeat(prev)
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
		}
		pick := []any{sql.Named("run_id", p.RunID), sql.Named("id", p.ID), sql.Named("kind", string(p.Kind)), sql.Named("name", "")}
		cur, err := sqlrow.Wait(tx.QueryRowContext(ctx, waitPendingSQL, pick...))
		if errors.Is(err, sql.ErrNoRows) || err == nil && run.Status.Terminal() {
			latest, err := sqlrow.Wait(tx.QueryRowContext(ctx, waitLatestSQL, pick...))
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
			return p.NotPending(run, latest, err == nil)
		}
		if err != nil {
			return err
		}
		if err := p.Check(cur); err != nil {
			return err
		}
		answered, err = closeWait(ctx, tx, cur, store.WaitAnswered, p.Answer, p.Key, p.By, p.Now, trace)
		return err
	})
	if err != nil {
		return answered, repeated, fmt.Errorf("answer run %s: %w", p.RunID, err)
	}
	return answered, repeated, nil
}

// closeWait answers or expires a pending wait, queues its run if nothing of
// it is pending any more, and appends the events of trace.
func closeWait(ctx context.Context, tx *writeTx, w store.Wait, status store.WaitStatus, answer []byte, key, by string,
	now time.Time, trace sqlrow.JournalEntry) (store.Wait, error) {
	closed, err := sqlrow.Wait(tx.QueryRowContext(ctx, waitAnswerSQL,
		sql.Named("id", w.ID),
		sql.Named("status", string(status)),
		sql.Named("answer", answer),
		sql.Named("key", key),
		sql.Named("by", by),
		sql.Named("now", sqlrow.Nanos(now)),
	))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Wait{}, store.ErrNotWaiting
	}
	if err != nil {
		return store.Wait{}, err
	}
	res, err := tx.ExecContext(ctx, runWakeAnsweredSQL, sql.Named("run_id", w.RunID), sql.Named("now", sqlrow.Nanos(now)))
	if err != nil {
		return store.Wait{}, err
	}
	if err := raiseWakeupIf(ctx, tx, res); err != nil {
		return store.Wait{}, err
	}
	return closed, appendEvents(ctx, tx, w.RunID, trace)
}

// ExpireDueWaits expires up to 100 pending waits past their expiry, across
// tenants, in one transaction.
func (s *Store) ExpireDueWaits(ctx context.Context, p store.ExpireWaitsParams) ([]store.ExpiredWait, error) {
	var expired []store.ExpiredWait
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		expired = nil // a batch may run twice
		due, err := txAll(ctx, tx, sqlrow.Wait, waitDueSQL, sql.Named("now", sqlrow.Nanos(p.Now)))
		if err != nil {
			return err
		}
		for _, w := range due {
			events := store.WaitExpiry(w, p.Now)
			closed, err := closeWait(ctx, tx, w, store.WaitExpired, nil, "", store.WaitExpirer, p.Now, eventsEntry(p.Now, events))
			if err != nil {
				return err
			}
			expired = append(expired, store.ExpiredWait{Wait: closed, Events: events})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expire waits: %w", err)
	}
	return expired, nil
}
