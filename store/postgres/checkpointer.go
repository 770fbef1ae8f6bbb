package postgres

import (
	"context"
	"errors"
	"slices"
	"sync"

	_ "embed"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

//go:embed query/run_checkpoint_group.sql
var runCheckpointGroupSQL string

// checkpointer group-commits checkpoints (see the package documentation).
// A writer goroutine takes the checkpoints waiting when it is free, up to
// maxBatch, writes them in one statement, replies to each, and starts over.
// It never waits for more to come: the checkpoints that arrive while it
// writes make its next batch.
//
// Another writer takes a batch while one is busy only if helperMin or more
// checkpoints wait: one writer makes the biggest batches, which cost the
// server least per checkpoint, and a second keeps a long queue moving while
// the first waits for its commit to reach the disk.
type checkpointer struct {
	s         *Store
	maxBatch  int
	helperMin int

	// mu guards queue, busy and closed; cond signals a change of any. busy
	// counts the writes in flight: batches of writers, and checkpoints their
	// callers write themselves.
	mu     sync.Mutex
	cond   *sync.Cond
	queue  []*checkpointRequest
	busy   int
	closed bool
	wg     sync.WaitGroup
}

type checkpointRequest struct {
	// ctx is the caller's: a request whose caller has given up before its
	// turn is skipped, and one written alone is written under it.
	ctx context.Context
	p   store.CheckpointParams
	// j is the checkpoint's journal row, encoded by its caller.
	j sqlrow.JournalEntry
	// err is buffered, so that a writer never waits for a caller that has
	// given up.
	err chan error
}

// startCheckpointer starts writers goroutines; each exits when close is
// called, never with a request taken and not replied to.
func startCheckpointer(s *Store, writers, maxBatch, helperMin int) *checkpointer {
	c := &checkpointer{s: s, maxBatch: maxBatch, helperMin: helperMin}
	c.cond = sync.NewCond(&c.mu)
	for range writers {
		c.wg.Go(c.run)
	}
	return c
}

// close stops the writers after the batches in flight, waits for them and
// fails the requests still queued with ErrClosed.
func (c *checkpointer) close() {
	c.mu.Lock()
	c.closed = true
	c.cond.Broadcast()
	c.mu.Unlock()
	c.wg.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.queue {
		r.err <- ErrClosed
	}
	c.queue = nil
}

// do writes p and returns once it has committed, or failed. When nothing
// else is being written, the caller writes p itself, alone; otherwise p
// joins the queue for a writer's next batch. If ctx ends while p is still
// queued, do takes it out and returns ctx's error: nothing was written.
// Once p is being written, do waits for the outcome (see store.Store's
// Checkpoint).
func (c *checkpointer) do(ctx context.Context, p store.CheckpointParams, j sqlrow.JournalEntry) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	if c.busy == 0 && len(c.queue) == 0 {
		c.busy++
		c.mu.Unlock()
		return c.writeAlone(ctx, p, j)
	}
	r := &checkpointRequest{ctx: ctx, p: p, j: j, err: make(chan error, 1)}
	c.queue = append(c.queue, r)
	c.cond.Signal()
	c.mu.Unlock()
	select {
	case err := <-r.err:
		return err
	case <-ctx.Done():
	}
	c.mu.Lock()
	if i := slices.Index(c.queue, r); i >= 0 {
		c.queue = slices.Delete(c.queue, i, i+1)
		c.mu.Unlock()
		return ctx.Err()
	}
	c.mu.Unlock()
	// A writer has it: it replies once the batch has committed or failed.
	return <-r.err
}

// writeAlone writes p on the caller's goroutine, as a writer would a batch
// of one: handing it to a writer goroutine and back added about a tenth to
// the latency of a checkpoint made alone.
func (c *checkpointer) writeAlone(ctx context.Context, p store.CheckpointParams, j sqlrow.JournalEntry) error {
	defer func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.busy--
		if len(c.queue) > 0 {
			c.cond.Signal()
		}
	}()
	// Not under ctx: pgx would cancel the statement when it ends, and a
	// cancel that arrives as the commit does leaves the outcome unknown.
	return c.s.checkpointOne(context.WithoutCancel(ctx), p, j)
}

// run is a writer goroutine.
func (c *checkpointer) run() {
	batch := make([]*checkpointRequest, 0, c.maxBatch)
	errs := make([]error, c.maxBatch)
	for {
		batch = c.take(batch)
		if len(batch) == 0 {
			return
		}
		errs = errs[:len(batch)]
		c.write(batch, errs)
		// Replies go out only now, so that no caller hears of success
		// before the transaction is durable.
		for i, r := range batch {
			r.err <- errs[i]
		}
		clear(batch)
		batch = batch[:0]
		c.mu.Lock()
		c.busy--
		c.mu.Unlock()
	}
}

// take waits until this writer may write a batch and moves it from the
// queue to batch; it returns batch empty once the checkpointer is closed.
func (c *checkpointer) take(batch []*checkpointRequest) []*checkpointRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if c.closed {
			return batch
		}
		if n := len(c.queue); n > 0 && (c.busy == 0 || n >= c.helperMin) {
			n = min(n, c.maxBatch)
			batch = append(batch, c.queue[:n]...)
			c.queue = append(c.queue[:0], c.queue[n:]...)
			c.busy++
			if len(c.queue) > 0 {
				// What is left may make another writer's batch.
				c.cond.Signal()
			}
			return batch
		}
		c.cond.Wait()
	}
}

// write writes a batch and sets errs[i] to the outcome of batch[i].
func (c *checkpointer) write(batch []*checkpointRequest, errs []error) {
	clear(errs)
	// A run checkpointed twice in one batch (a stale writer racing its
	// successor, say) has its second checkpoint written alone, after.
	var (
		group = make([]*checkpointRequest, 0, len(batch))
		at    = make([]int, 0, len(batch))
		later []int
		seen  = make(map[string]struct{}, len(batch))
	)
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			errs[i] = checkpointError(r.p, err)
			continue
		}
		_, dup := seen[r.p.Fence.RunID]
		seen[r.p.Fence.RunID] = struct{}{}
		if dup || len(r.p.Waits) > 0 {
			// The group statement does not insert waits: a checkpoint that
			// makes its run wait, which is rare, is written alone.
			later = append(later, i)
			continue
		}
		group, at = append(group, r), append(at, i)
	}
	switch len(group) {
	case 0:
	case 1:
		errs[at[0]] = c.s.checkpointOne(context.WithoutCancel(group[0].ctx), group[0].p, group[0].j)
	default:
		outcome, err := c.s.checkpointGroup(group)
		switch {
		case err == nil:
			var wg sync.WaitGroup
			for j, i := range at {
				switch outcome[j] {
				case fenceHeld:
				case runHeld:
					// Another transaction holds the run's row: written
					// alone, the checkpoint waits for it without holding
					// up the batch.
					wg.Go(func() { errs[i] = c.s.checkpointOne(context.WithoutCancel(group[j].ctx), group[j].p, group[j].j) })
				default:
					errs[i] = checkpointError(group[j].p, store.ErrLeaseLost)
				}
			}
			wg.Wait()
		case rolledBack(err):
			// Nothing of the batch was written: one checkpoint failed (a
			// message rewritten, a key never begun), or a lock wait
			// deadlocked. Written alone, each meets its own fate.
			var wg sync.WaitGroup
			for j, i := range at {
				wg.Go(func() { errs[i] = c.s.checkpointOne(context.WithoutCancel(group[j].ctx), group[j].p, group[j].j) })
			}
			wg.Wait()
		default:
			// The connection failed: the batch may or may not have
			// committed, and writing it again could write it twice.
			for j, i := range at {
				errs[i] = checkpointError(group[j].p, err)
			}
		}
	}
	for _, i := range later {
		errs[i] = c.s.checkpointOne(context.WithoutCancel(batch[i].ctx), batch[i].p, batch[i].j)
	}
}

// rolledBack reports whether a statement that failed with err surely wrote
// nothing: the server refused it with an error, which rolls its transaction
// back, or it never left the client. A FATAL or PANIC may end the session
// after the commit, and a connection that broke may have broken after it.
func rolledBack(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.SeverityUnlocalized == "ERROR" || pe.SeverityUnlocalized == "" && pe.Severity == "ERROR"
	}
	return pgconn.SafeToRetry(err)
}

// groupOutcome is what became of one checkpoint of a group.
type groupOutcome int

const (
	// fencedOff: the fence did not hold; nothing was written.
	fencedOff groupOutcome = iota
	// fenceHeld: the checkpoint is written.
	fenceHeld
	// runHeld: another transaction held the run's row, so the checkpoint
	// was left out of the group; nothing of it was written.
	runHeld
)

// checkpointGroup writes the checkpoints of distinct runs in one statement
// and reports what became of each.
func (s *Store) checkpointGroup(rs []*checkpointRequest) ([]groupOutcome, error) {
	outcome := make([]groupOutcome, len(rs))
	// The statement carries the writes of many callers: none of their
	// contexts may end it.
	rows, err := s.pool.Query(context.Background(), runCheckpointGroupSQL, groupArgs(rs))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			ord     int64
			skipped bool
			woke    *string
		)
		if err := rows.Scan(&ord, &skipped, &woke); err != nil {
			return nil, err
		}
		outcome[ord-1] = fenceHeld
		if skipped {
			outcome[ord-1] = runHeld
		}
	}
	return outcome, rows.Err()
}

// groupArgs lays a batch out as the arrays run_checkpoint_group.sql
// unnests.
func groupArgs(rs []*checkpointRequest) namedArgs {
	var a groupArrays
	for i, r := range rs {
		a.add(int64(i+1), &r.p, r.j)
	}
	return a.args()
}

// groupArrays holds one element per checkpoint of a batch in its run
// arrays, and one per row appended in the others, naming the checkpoint by
// its ord: its place in the batch, from 1. An array left nil goes out as
// NULL, which unnest takes for an empty one.
type groupArrays struct {
	id, owner, status, stopReason, stopDetail, final                              []string
	epoch, inputTokens, outputTokens, modelCalls, cost, resumeAfter, expires, now []int64
	step, messageCount                                                            []int
	plan, guard, escalation                                                       [][]byte
	keep, wake                                                                    []bool

	// The checkpoint's journal row: no row where it appends nothing.
	firstMessage, messages, events, journalStep []int
	journalAt                                   []int64
	journalBody                                 [][]byte

	setReq                      []int64
	setTenant, setKey, setState []string
	setResult                   [][]byte

	apReq, apExpires                                                             []int64
	apStep                                                                       []int
	apID, apToolUseID, apTool, apHash, apReason, apCategory, apSummary, apPolicy []string
	apBinding                                                                    []string
	apArgs                                                                       [][]byte
	apSelf                                                                       []bool

	obReq     []int64
	obKind    []string
	obPayload [][]byte
}

func (a *groupArrays) add(ord int64, p *store.CheckpointParams, j sqlrow.JournalEntry) {
	u := &p.Run
	a.id = append(a.id, p.Fence.RunID)
	a.owner = append(a.owner, p.Fence.Owner)
	a.epoch = append(a.epoch, p.Fence.Epoch)
	a.keep = append(a.keep, u.KeepLease)
	a.status = append(a.status, string(u.Status))
	a.step = append(a.step, u.Step)
	a.messageCount = append(a.messageCount, u.Messages)
	a.inputTokens = append(a.inputTokens, u.InputTokens)
	a.outputTokens = append(a.outputTokens, u.OutputTokens)
	a.modelCalls = append(a.modelCalls, u.ModelCalls)
	a.cost = append(a.cost, u.CostNanoUSD)
	a.plan = append(a.plan, u.Plan)
	a.guard = append(a.guard, u.Guard)
	a.resumeAfter = append(a.resumeAfter, sqlrow.Nanos(u.ResumeAfter))
	a.stopReason = append(a.stopReason, u.StopReason)
	a.stopDetail = append(a.stopDetail, u.StopDetail)
	a.final = append(a.final, u.Final)
	a.escalation = append(a.escalation, u.Escalation)
	a.expires = append(a.expires, sqlrow.Nanos(u.LeaseExpires))
	a.now = append(a.now, sqlrow.Nanos(p.Now))
	a.wake = append(a.wake, wakes(*u))
	a.firstMessage = append(a.firstMessage, j.FirstMessage)
	a.messages = append(a.messages, j.Messages)
	a.events = append(a.events, j.Events)
	a.journalStep = append(a.journalStep, j.Step)
	a.journalAt = append(a.journalAt, j.At)
	a.journalBody = append(a.journalBody, j.Body)
	for _, e := range p.Effects {
		a.setReq = append(a.setReq, ord)
		a.setTenant = append(a.setTenant, e.Tenant)
		a.setKey = append(a.setKey, e.Key)
		a.setState = append(a.setState, string(e.State))
		a.setResult = append(a.setResult, e.Result)
	}
	for _, ap := range p.Approvals {
		a.apReq = append(a.apReq, ord)
		a.apID = append(a.apID, ap.ID)
		a.apStep = append(a.apStep, ap.Step)
		a.apToolUseID = append(a.apToolUseID, ap.ToolUseID)
		a.apTool = append(a.apTool, ap.Tool)
		a.apArgs = append(a.apArgs, ap.Args)
		a.apHash = append(a.apHash, ap.ArgsHash)
		a.apReason = append(a.apReason, ap.Reason)
		a.apCategory = append(a.apCategory, ap.Category)
		a.apSummary = append(a.apSummary, ap.Summary)
		a.apPolicy = append(a.apPolicy, ap.PolicyVersion)
		a.apBinding = append(a.apBinding, ap.Binding)
		a.apSelf = append(a.apSelf, ap.SelfApproval)
		a.apExpires = append(a.apExpires, sqlrow.Nanos(ap.ExpiresAt))
	}
	for _, o := range p.Outbox {
		a.obReq = append(a.obReq, ord)
		a.obKind = append(a.obKind, o.Kind)
		a.obPayload = append(a.obPayload, o.Payload)
	}
}

func (a *groupArrays) args() namedArgs {
	return namedArgs{
		"id": a.id, "owner": a.owner, "epoch": a.epoch, "keep": a.keep, "status": a.status,
		"step": a.step, "message_count": a.messageCount, "input_tokens": a.inputTokens,
		"output_tokens": a.outputTokens, "model_calls": a.modelCalls, "cost_nano_usd": a.cost,
		"plan": a.plan, "guard": a.guard, "resume_after": a.resumeAfter, "stop_reason": a.stopReason,
		"stop_detail": a.stopDetail, "final": a.final, "escalation": a.escalation,
		"lease_expires": a.expires, "now": a.now, "wake": a.wake,

		"first_message": a.firstMessage, "messages": a.messages, "events": a.events,
		"journal_step": a.journalStep, "journal_at": a.journalAt, "journal_body": a.journalBody,

		"settle_req": a.setReq, "settle_tenant": a.setTenant, "settle_key": a.setKey,
		"settle_state": a.setState, "settle_result": a.setResult,

		"approval_req": a.apReq, "approval_id": a.apID, "approval_step": a.apStep,
		"approval_tool_use_id": a.apToolUseID, "approval_tool": a.apTool, "approval_args": a.apArgs,
		"approval_args_hash": a.apHash, "approval_reason": a.apReason,
		"approval_category": a.apCategory, "approval_summary": a.apSummary,
		"approval_policy_version": a.apPolicy, "approval_binding": a.apBinding,
		"approval_self_approval": a.apSelf, "approval_expires_at": a.apExpires,

		"outbox_req": a.obReq, "outbox_kind": a.obKind, "outbox_payload": a.obPayload,
	}
}

// A store has checkpointWriters writers; a batch holds up to
// checkpointBatch checkpoints, and a writer helps a busy one when
// checkpointHelperMin or more wait. On 2 cores, a batch costs the server
// about 0.4 ms beyond 40 to 60 µs per checkpoint in it, and a checkpoint
// written alone about 0.35 ms.
const (
	checkpointWriters   = 2
	checkpointBatch     = 64
	checkpointHelperMin = 16
)
