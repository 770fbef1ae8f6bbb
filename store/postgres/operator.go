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
	//go:embed query/outbox_insert.sql
	outboxInsertSQL string
	//go:embed query/outbox_list.sql
	outboxListSQL string
	//go:embed query/run_lock.sql
	runLockSQL string
	//go:embed query/run_resume.sql
	runResumeSQL string
	//go:embed query/kill_switch_set.sql
	killSwitchSetSQL string
	//go:embed query/kill_switch_get.sql
	killSwitchGetSQL string
	//go:embed query/run_requeue_stopped.sql
	runRequeueStoppedSQL string
)

func queueOutbox(b *pgx.Batch, runID string, now time.Time, msgs []store.OutboxMessage) {
	for _, m := range msgs {
		b.Queue(outboxInsertSQL, namedArgs{
			"run_id":  runID,
			"kind":    m.Kind,
			"payload": []byte(m.Payload),
			"now":     sqlrow.Nanos(now),
		})
	}
}

// Outbox returns a run's notifications in order.
func (s *Store) Outbox(ctx context.Context, runID string) ([]store.OutboxMessage, error) {
	out, err := queryAll(ctx, s.pool, sqlrow.Outbox, outboxListSQL, namedArgs{"run_id": runID})
	if err != nil {
		return nil, fmt.Errorf("outbox of run %s: %w", runID, err)
	}
	return out, nil
}

// ResumeRun queues a run that waits for a person, as its tenant, and wakes
// idle workers.
func (s *Store) ResumeRun(ctx context.Context, p store.ResumeRunParams) (store.Run, error) {
	var (
		run    store.Run
		locked lockedRun
	)
	b := s.txBatch(p.Tenant)
	queueRunLock(b, p.Tenant, p.RunID, &locked)
	err := s.inTx(ctx, b, func(tx pgx.Tx) error {
		if err := p.Check(locked.status); err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(runResumeSQL, namedArgs{
			"id":            p.RunID,
			"tenant":        p.Tenant,
			"budget":        []byte(p.Budget),
			"agent_version": p.AgentVersion,
			"stop_reason":   p.StopReason,
			"now":           sqlrow.Nanos(p.Now),
		}).QueryRow(func(row pgx.Row) (err error) {
			run, err = sqlrow.Run(row)
			if errors.Is(err, pgx.ErrNoRows) {
				// The run is locked and exists: only its stop reason differs.
				return p.StopReasonMismatch(locked.stopReason)
			}
			return err
		})
		queueSettles(b, p.Now, p.Effects)
		queueEvents(b, p.RunID, p.Events)
		b.Queue(runWakeupSQL, namedArgs{"id": p.RunID})
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return store.Run{}, fmt.Errorf("resume run %s: %w", p.RunID, err)
	}
	return run, nil
}

// lockedRun is what queueRunLock reads of the run it locks.
type lockedRun struct {
	status     store.Status
	stopReason string
}

// queueRunLock locks a run of a tenant ("" for any) until the transaction
// ends and reads it into *locked, or fails with store.ErrNotFound.
func queueRunLock(b *pgx.Batch, tenant, id string, locked *lockedRun) {
	b.Queue(runLockSQL, namedArgs{"id": id, "tenant": tenant}).QueryRow(func(row pgx.Row) error {
		err := row.Scan((*string)(&locked.status), &locked.stopReason)
		if errors.Is(err, pgx.ErrNoRows) {
			return store.ErrNotFound
		}
		return err
	})
}

// SetKillSwitch engages or releases a kill switch, as its tenant (the
// global switch as every tenant). Releasing one queues the runs it paused
// that no other engaged switch still covers, and wakes idle workers.
func (s *Store) SetKillSwitch(ctx context.Context, p store.KillSwitchParams) error {
	b := s.batch(p.Tenant)
	b.Queue(killSwitchSetSQL, namedArgs{
		"tenant":  p.Tenant,
		"engaged": p.Engaged,
		"reason":  p.Reason,
		"now":     sqlrow.Nanos(p.Now),
	})
	if !p.Engaged && p.ResumeReason != "" {
		b.Queue(runRequeueStoppedSQL, namedArgs{
			"tenant":      p.Tenant,
			"stop_reason": p.ResumeReason,
			"now":         sqlrow.Nanos(p.Now),
		})
	}
	if err := s.send(ctx, b); err != nil {
		return fmt.Errorf("set kill switch: %w", err)
	}
	return nil
}

// KillSwitch reports whether the tenant's switch or the global one is
// engaged. It reads as the tenant, which sees its own switch and the global
// one.
func (s *Store) KillSwitch(ctx context.Context, tenant string) (bool, string, error) {
	var (
		engaged bool
		reason  string
	)
	b := s.batch(tenant)
	b.Queue(killSwitchGetSQL, namedArgs{"tenant": tenant}).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&engaged, &reason)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
	if err := s.send(ctx, b); err != nil {
		return false, "", fmt.Errorf("kill switch of %q: %w", tenant, err)
	}
	return engaged, reason, nil
}
