package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	_ "embed"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/run_checkpoint.sql
	runCheckpointSQL string
	//go:embed query/run_checkpoint_keep.sql
	runCheckpointKeepSQL string
	//go:embed query/run_key_waiting.sql
	runKeyWaitingSQL string
)

// Checkpoint writes one step in one savepoint of the writer's transaction:
// the run's new state first, fenced by its lease, then the messages and
// events it appends and the effects it settles. If the fence does not match
// or any part fails, nothing of it is written.
func (s *Store) Checkpoint(ctx context.Context, p store.CheckpointParams) error {
	if err := p.Check(); err != nil {
		return fmt.Errorf("checkpoint run %s: %w", p.Fence.RunID, err)
	}
	query := runCheckpointSQL
	if p.Run.KeepLease {
		query = runCheckpointKeepSQL
	}
	journal := sqlrow.NewJournalEntry(p.Now, p.Messages, p.Events)
	err := s.writer.do(ctx, checkpointBytes(p), func(ctx context.Context, tx *writeTx) error {
		u := p.Run
		res, err := tx.ExecContext(ctx, query,
			sql.Named("id", p.Fence.RunID),
			sql.Named("owner", p.Fence.Owner),
			sql.Named("epoch", p.Fence.Epoch),
			sql.Named("status", string(u.Status)),
			sql.Named("step", u.Step),
			sql.Named("message_count", u.Messages),
			sql.Named("first_message", journal.FirstMessage),
			sql.Named("events", journal.Events),
			sql.Named("input_tokens", u.InputTokens),
			sql.Named("output_tokens", u.OutputTokens),
			sql.Named("model_calls", u.ModelCalls),
			sql.Named("cost_nano_usd", u.CostNanoUSD),
			sql.Named("plan", []byte(u.Plan)),
			sql.Named("guard", []byte(u.Guard)),
			sql.Named("resume_after", sqlrow.Nanos(u.ResumeAfter)),
			sql.Named("stop_reason", u.StopReason),
			sql.Named("stop_detail", u.StopDetail),
			sql.Named("final", u.Final),
			sql.Named("escalation", []byte(u.Escalation)),
			sql.Named("lease_expires", sqlrow.Nanos(u.LeaseExpires)),
			sql.Named("now", sqlrow.Nanos(p.Now)),
		)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n != 1 {
			return whyRefused(ctx, tx, p.Fence, journal.FirstMessage)
		}
		if err := appendJournal(ctx, tx, p.Fence.RunID, journal); err != nil {
			return err
		}
		if err := settleEffects(ctx, tx, p.Now, p.Effects); err != nil {
			return err
		}
		if err := insertApprovals(ctx, tx, p.Fence.RunID, p.Now, p.Approvals); err != nil {
			return err
		}
		if err := insertWaits(ctx, tx, p.Fence.RunID, p.Now, p.Waits); err != nil {
			return err
		}
		wake := p.Run.LetsGoWhileDue()
		if !wake && p.Run.LeavesRunning() {
			if err := tx.QueryRowContext(ctx, runKeyWaitingSQL, sql.Named("id", p.Fence.RunID)).Scan(&wake); err != nil {
				return err
			}
		}
		if wake {
			if err := raiseWakeup(ctx, tx); err != nil {
				return err
			}
		}
		return insertOutbox(ctx, tx, p.Fence.RunID, p.Now, p.Outbox)
	})
	if err != nil {
		return fmt.Errorf("checkpoint run %s: %w", p.Fence.RunID, err)
	}
	return nil
}

// whyRefused says why a checkpoint's update matched no row: the lease was
// lost (or the run ended), or the lease holds and the checkpoint appends a
// message the run has already.
func whyRefused(ctx context.Context, tx *writeTx, f store.Fence, firstMessage int) error {
	if firstMessage >= 0 {
		var held int
		if err := tx.QueryRowContext(ctx, runFencedSQL,
			sql.Named("id", f.RunID), sql.Named("owner", f.Owner), sql.Named("epoch", f.Epoch),
		).Scan(&held); err != nil {
			return err
		}
		if held > 0 {
			return fmt.Errorf("append message %d: %w", firstMessage, store.ErrMessageExists)
		}
	}
	return store.ErrLeaseLost
}

func checkpointBytes(p store.CheckpointParams) int64 {
	n := int64(len(p.Run.Plan) + len(p.Run.Guard) + len(p.Run.Final) + len(p.Run.Escalation))
	for _, o := range p.Outbox {
		n += int64(len(o.Payload))
	}
	for _, m := range p.Messages {
		n += int64(len(m.Content))
	}
	for _, e := range p.Effects {
		n += int64(len(e.Result))
	}
	return n + eventBytes(p.Events)
}
