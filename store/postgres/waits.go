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

var _ store.Waiter = (*Store)(nil)

var (
	//go:embed query/wait_insert.sql
	waitInsertSQL string
	//go:embed query/wait_list.sql
	waitListSQL string
	//go:embed query/wait_list_run.sql
	waitListRunSQL string
	//go:embed query/wait_lock_run.sql
	waitLockRunSQL string
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
	//go:embed query/wait_list_pending.sql
	waitListPendingSQL string
	//go:embed query/run_wake_answered.sql
	runWakeAnsweredSQL string
)

// queueWaits inserts a checkpoint's waits pending; one that exists for the
// same (tenant, run, tool use) is kept as it is.
func queueWaits(b *pgx.Batch, runID string, now time.Time, ws []store.Wait) {
	for _, w := range ws {
		b.Queue(waitInsertSQL, namedArgs{
			"id":          w.ID,
			"run_id":      runID,
			"step":        w.Step,
			"tool_use_id": w.ToolUseID,
			"kind":        string(w.Kind),
			"name":        w.Name,
			"prompt":      []byte(w.Prompt),
			"binding":     w.Binding,
			"expires_at":  sqlrow.Nanos(w.ExpiresAt),
			"now":         sqlrow.Nanos(now),
		})
		if w.Kind == store.WaitEvent {
			// A signal the run kept answers the wait at once, and the run
			// the checkpoint makes wait is queued again.
			b.Queue(waitConsumeKeptSQL, namedArgs{"id": w.ID, "now": sqlrow.Nanos(now)})
			b.Queue(runWakeAnsweredSQL, namedArgs{"run_id": runID, "now": sqlrow.Nanos(now)})
		}
	}
}

// Waits returns waits in creation order, as the tenant when one is given.
func (s *Store) Waits(ctx context.Context, p store.ListWaitsParams) ([]store.Wait, error) {
	var limit any // null: no limit
	if p.Limit > 0 {
		limit = p.Limit
	}
	query, args := waitListSQL, namedArgs{"tenant": p.Tenant, "status": string(p.Status), "kinds": p.KindList(),
		"after": p.After, "limit": limit}
	if p.RunID != "" {
		query, args["run_id"] = waitListRunSQL, p.RunID
	}
	var ws []store.Wait
	b := s.batch(p.Tenant)
	b.Queue(query, args).Query(collect(&ws, sqlrow.Wait))
	if err := s.send(ctx, b); err != nil {
		return nil, fmt.Errorf("list waits: %w", err)
	}
	return ws, nil
}

// AnswerWait records an answer once, as the tenant, with the run's row
// locked first, and queues the run and wakes idle workers when nothing of
// it is pending any more.
func (s *Store) AnswerWait(ctx context.Context, p store.AnswerWaitParams) (store.Wait, bool, error) {
	var (
		run      store.Run
		answered store.Wait
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
			prev, err := sqlrow.Wait(tx.QueryRow(ctx, waitByKeySQL, namedArgs{"tenant": run.Tenant, "run_id": run.ID, "key": p.Key}))
			switch {
			case err == nil:
				answered, repeated = prev, true
				return p.Repeat(prev)
			case !errors.Is(err, pgx.ErrNoRows):
				return err
			}
		}
		pick := namedArgs{"tenant": run.Tenant, "run_id": run.ID, "id": p.ID, "kind": string(p.Kind), "name": ""}
		cur, err := sqlrow.Wait(tx.QueryRow(ctx, waitPendingSQL, pick))
		if errors.Is(err, pgx.ErrNoRows) || err == nil && run.Status.Terminal() {
			latest, err := sqlrow.Wait(tx.QueryRow(ctx, waitLatestSQL, pick))
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
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
		b := &pgx.Batch{}
		queueCloseWait(b, cur, store.WaitAnswered, p.Answer, p.Key, p.By, p.Now, p.Events, &answered)
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return answered, repeated, fmt.Errorf("answer run %s: %w", p.RunID, err)
	}
	return answered, repeated, nil
}

// queueCloseWait answers or expires a pending wait into *closed, queues its
// run if nothing of it is pending any more, and appends events.
func queueCloseWait(b *pgx.Batch, w store.Wait, status store.WaitStatus, answer []byte, key, by string,
	now time.Time, events []store.Event, closed *store.Wait) {
	b.Queue(waitAnswerSQL, namedArgs{
		"id":     w.ID,
		"status": string(status),
		"answer": answer,
		"key":    key,
		"by":     by,
		"now":    sqlrow.Nanos(now),
	}).QueryRow(func(row pgx.Row) (err error) {
		*closed, err = sqlrow.Wait(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotWaiting
		}
		return err
	})
	b.Queue(runWakeAnsweredSQL, namedArgs{"run_id": w.RunID, "now": sqlrow.Nanos(now)})
	queueEvents(b, w.RunID, events)
}

// ExpireDueWaits expires up to 100 pending waits past their expiry, across
// tenants, in one transaction, and queues the runs left with nothing
// pending.
func (s *Store) ExpireDueWaits(ctx context.Context, p store.ExpireWaitsParams) ([]store.ExpiredWait, error) {
	var dueIDs []string
	b := s.txBatch("")
	b.Queue(waitDueSQL, namedArgs{"now": sqlrow.Nanos(p.Now)}).Query(func(rows pgx.Rows) (err error) {
		dueIDs, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	var expired []store.ExpiredWait
	err := s.inTx(ctx, b, func(tx pgx.Tx) error {
		if len(dueIDs) == 0 {
			return nil
		}
		// Read again now that the runs are locked: one may have been
		// answered in between.
		due, err := queryAll(ctx, tx, sqlrow.Wait, waitListPendingSQL, namedArgs{"ids": dueIDs})
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		closed := make([]store.ExpiredWait, len(due))
		for i, w := range due {
			closed[i].Events = store.WaitExpiry(w, p.Now)
			queueCloseWait(b, w, store.WaitExpired, nil, "", store.WaitExpirer, p.Now, closed[i].Events, &closed[i].Wait)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
		expired = closed
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expire waits: %w", err)
	}
	return expired, nil
}
