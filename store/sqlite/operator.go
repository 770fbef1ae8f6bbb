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
	//go:embed query/outbox_insert.sql
	outboxInsertSQL string
	//go:embed query/outbox_list.sql
	outboxListSQL string
	//go:embed query/run_resume.sql
	runResumeSQL string
	//go:embed query/kill_switch_set.sql
	killSwitchSetSQL string
	//go:embed query/kill_switch_get.sql
	killSwitchGetSQL string
	//go:embed query/run_requeue_stopped.sql
	runRequeueStoppedSQL string
	//go:embed query/run_cancel.sql
	runCancelSQL string
	//go:embed query/approval_reject_run.sql
	approvalRejectRunSQL string
)

func insertOutbox(ctx context.Context, tx *writeTx, runID string, now time.Time, msgs []store.OutboxMessage) error {
	for _, m := range msgs {
		if _, err := tx.ExecContext(ctx, outboxInsertSQL,
			sql.Named("run_id", runID),
			sql.Named("kind", m.Kind),
			sql.Named("payload", []byte(m.Payload)),
			sql.Named("now", sqlrow.Nanos(now)),
		); err != nil {
			return fmt.Errorf("outbox %s: %w", m.Kind, err)
		}
	}
	return nil
}

// Outbox returns a run's notifications in order.
func (s *Store) Outbox(ctx context.Context, runID string) ([]store.OutboxMessage, error) {
	out, err := readAll(ctx, s.read, sqlrow.Outbox, outboxListSQL, sql.Named("run_id", runID))
	if err != nil {
		return nil, fmt.Errorf("outbox of run %s: %w", runID, err)
	}
	return out, nil
}

// ResumeRun queues a run that waits for a person.
func (s *Store) ResumeRun(ctx context.Context, p store.ResumeRunParams) (store.Run, error) {
	var run store.Run
	trace := eventsEntry(p.Now, p.Events)
	err := s.writer.do(ctx, eventBytes(p.Events), func(ctx context.Context, tx *writeTx) error {
		cur, err := sqlrow.Run(tx.QueryRowContext(ctx, runGetSQL, sql.Named("id", p.RunID), sql.Named("tenant", p.Tenant)))
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if err := p.Check(cur.Status); err != nil {
			return err
		}
		var budget any
		if p.Budget != nil {
			budget = []byte(p.Budget)
		}
		run, err = sqlrow.Run(tx.QueryRowContext(ctx, runResumeSQL,
			sql.Named("id", p.RunID),
			sql.Named("tenant", p.Tenant),
			sql.Named("budget", budget),
			sql.Named("agent_version", p.AgentVersion),
			sql.Named("stop_reason", p.StopReason),
			sql.Named("now", sqlrow.Nanos(p.Now)),
		))
		if errors.Is(err, sql.ErrNoRows) {
			return p.StopReasonMismatch(cur.StopReason)
		}
		if err != nil {
			return err
		}
		if err := settleEffects(ctx, tx, p.Now, p.Effects); err != nil {
			return err
		}
		if err := raiseWakeup(ctx, tx); err != nil {
			return err
		}
		return appendEvents(ctx, tx, p.RunID, trace)
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("resume run %s: %w", p.RunID, err)
	}
	return run, nil
}

// CancelRun cancels a run that has not ended and rejects its pending
// approvals. The run's lease is released, so the worker holding it finds its
// next write refused.
func (s *Store) CancelRun(ctx context.Context, p store.CancelRunParams) (store.Run, error) {
	var run store.Run
	trace := eventsEntry(p.Now, p.Events)
	err := s.writer.do(ctx, eventBytes(p.Events), func(ctx context.Context, tx *writeTx) error {
		cur, err := sqlrow.Run(tx.QueryRowContext(ctx, runGetSQL, sql.Named("id", p.RunID), sql.Named("tenant", p.Tenant)))
		if errors.Is(err, sql.ErrNoRows) {
			return store.ErrNotFound
		}
		if err != nil {
			return err
		}
		if err := p.Check(cur.Status); err != nil {
			return err
		}
		run, err = sqlrow.Run(tx.QueryRowContext(ctx, runCancelSQL,
			sql.Named("id", p.RunID),
			sql.Named("stop_detail", p.StopDetail()),
			sql.Named("now", sqlrow.Nanos(p.Now)),
		))
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, approvalRejectRunSQL,
			sql.Named("run_id", p.RunID),
			sql.Named("by", p.By),
			sql.Named("note", p.Note),
			sql.Named("now", sqlrow.Nanos(p.Now)),
		); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, waitCancelRunSQL,
			sql.Named("run_id", p.RunID),
			sql.Named("by", p.By),
			sql.Named("now", sqlrow.Nanos(p.Now)),
		); err != nil {
			return err
		}
		if err := insertOutbox(ctx, tx, p.RunID, p.Now, p.Outbox); err != nil {
			return err
		}
		return appendEvents(ctx, tx, p.RunID, trace)
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("cancel run %s: %w", p.RunID, err)
	}
	return run, nil
}

// SetKillSwitch engages or releases a kill switch; releasing one queues the
// runs it paused that no other engaged switch still covers.
func (s *Store) SetKillSwitch(ctx context.Context, p store.KillSwitchParams) error {
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		if _, err := tx.ExecContext(ctx, killSwitchSetSQL,
			sql.Named("tenant", p.Tenant),
			sql.Named("engaged", p.Engaged),
			sql.Named("reason", p.Reason),
			sql.Named("now", sqlrow.Nanos(p.Now)),
		); err != nil {
			return err
		}
		if p.Engaged || p.ResumeReason == "" {
			return nil
		}
		res, err := tx.ExecContext(ctx, runRequeueStoppedSQL,
			sql.Named("tenant", p.Tenant),
			sql.Named("stop_reason", p.ResumeReason),
			sql.Named("now", sqlrow.Nanos(p.Now)),
		)
		if err != nil {
			return err
		}
		return raiseWakeupIf(ctx, tx, res)
	})
	if err != nil {
		return fmt.Errorf("set kill switch: %w", err)
	}
	return nil
}

// KillSwitch reports whether the tenant's switch or the global one is
// engaged.
func (s *Store) KillSwitch(ctx context.Context, tenant string) (bool, string, error) {
	var (
		engaged bool
		reason  string
	)
	err := s.read.QueryRowContext(ctx, killSwitchGetSQL, sql.Named("tenant", tenant)).Scan(&engaged, &reason)
	if errors.Is(err, sql.ErrNoRows) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("kill switch of %q: %w", tenant, err)
	}
	return engaged, reason, nil
}
