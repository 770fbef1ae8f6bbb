package postgres

import (
	"context"
	"fmt"

	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/run_checkpoint.sql
	runCheckpointSQL string
	//go:embed query/run_checkpoint_keep.sql
	runCheckpointKeepSQL string
)

// Checkpoint writes one step in one transaction: the run's new state,
// fenced by its lease, then the messages and events it appends, the effects
// it settles, the approvals it asks for and its notifications. If the fence
// does not match, nothing of it is written and it returns
// store.ErrLeaseLost. A checkpoint that lets go of a run still due (running
// or queued) wakes idle workers, so another takes it at once.
//
// Checkpoints made at once are group-committed (see checkpointer): those
// of many runs share one statement and one commit, and each gets its own
// outcome.
//
// A mid-run checkpoint that keeps the lease (KeepLease) leaves status,
// lease, timer and claim order as they are: it changes no indexed column, so
// PostgreSQL rewrites the row in place without touching its indexes.
func (s *Store) Checkpoint(ctx context.Context, p store.CheckpointParams) error {
	if err := p.Check(); err != nil {
		return checkpointError(p, err)
	}
	return s.checkpoints.do(ctx, p, sqlrow.NewJournalEntry(p.Now, p.Messages, p.Events))
}

// checkpointOne writes one checkpoint in one round trip: the statements go
// out together and run as one implicit transaction. The fenced update comes
// first and raises if the fence does not match, which aborts the rest.
func (s *Store) checkpointOne(ctx context.Context, p store.CheckpointParams, j sqlrow.JournalEntry) error {
	u := p.Run
	query := runCheckpointSQL
	if u.KeepLease {
		query = runCheckpointKeepSQL
	}
	args := namedArgs{
		"id":            p.Fence.RunID,
		"owner":         p.Fence.Owner,
		"epoch":         p.Fence.Epoch,
		"step":          u.Step,
		"message_count": u.Messages,
		"first_message": j.FirstMessage,
		"events":        j.Events,
		"input_tokens":  u.InputTokens,
		"output_tokens": u.OutputTokens,
		"model_calls":   u.ModelCalls,
		"cost_nano_usd": u.CostNanoUSD,
		"plan":          []byte(u.Plan),
		"guard":         []byte(u.Guard),
		"stop_reason":   u.StopReason,
		"stop_detail":   u.StopDetail,
		"final":         u.Final,
		"escalation":    []byte(u.Escalation),
		"now":           sqlrow.Nanos(p.Now),
	}
	if !u.KeepLease {
		args["status"] = string(u.Status)
		args["resume_after"] = sqlrow.Nanos(u.ResumeAfter)
		args["lease_expires"] = sqlrow.Nanos(u.LeaseExpires)
	}
	b := &pgx.Batch{}
	b.Queue(query, args)
	queueCheckpointJournal(b, p.Fence.RunID, j)
	queueSettles(b, p.Now, p.Effects)
	queueApprovals(b, p.Fence.RunID, p.Now, p.Approvals)
	queueWaits(b, p.Fence.RunID, p.Now, p.Waits)
	queueOutbox(b, p.Fence.RunID, p.Now, p.Outbox)
	if wakes(u) {
		b.Queue(runWakeupSQL, namedArgs{"id": p.Fence.RunID})
	} else if u.LeavesRunning() {
		b.Queue(runWakeupKeySQL, namedArgs{"id": p.Fence.RunID})
	}
	return checkpointError(p, s.send(ctx, b))
}

// wakes reports whether a checkpoint lets go of a run still due.
func wakes(u store.RunUpdate) bool { return u.LetsGoWhileDue() }

func checkpointError(p store.CheckpointParams, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("checkpoint run %s: %w", p.Fence.RunID, err)
}
