package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

// claimIn creates a run of tenant and claims it for owner.
func claimIn(t *testing.T, s *Store, id, tenant, owner string) store.Run {
	t.Helper()
	if _, _, err := s.CreateRun(t.Context(), store.CreateRunParams{ID: id, Tenant: tenant, Agent: "a", Now: t0}); err != nil {
		t.Fatal(err)
	}
	// Runs of this test are claimed one at a time, oldest first: this one.
	runs, err := s.ClaimRuns(t.Context(), store.ClaimRunsParams{Owner: owner, Now: t0, TTL: time.Hour, Limit: 1})
	if err != nil || len(runs) != 1 || runs[0].ID != id {
		t.Fatalf("claim %s: %v, %v", id, ids(runs), err)
	}
	return runs[0]
}

func fenceOf(r store.Run) store.Fence {
	return store.Fence{RunID: r.ID, Owner: r.LeaseOwner, Epoch: r.LeaseEpoch}
}

// stepOf is the checkpoint of step n of a claimed run: its state, a
// message, two events, and what more is given.
func stepOf(r store.Run, f store.Fence, n int, more func(*store.CheckpointParams)) store.CheckpointParams {
	p := store.CheckpointParams{
		Fence: f,
		Now:   t0.Add(time.Duration(n) * time.Second),
		Run: store.RunUpdate{
			Status: store.StatusRunning, Step: n, Messages: n, ModelCalls: int64(n),
			Guard:        json.RawMessage(fmt.Sprintf(`{"step":%d}`, n)),
			LeaseExpires: t0.Add(time.Hour),
			KeepLease:    true,
		},
		Messages: []store.Message{{Seq: n - 1, Step: n, Role: "assistant", Content: []byte(fmt.Sprintf(`"%s %d"`, f.Owner, n)), CreatedAt: t0}},
		Events: []store.Event{
			{Step: n, Type: fmt.Sprintf("model_call %s", f.Owner), Time: t0, Data: json.RawMessage(`{}`)},
			{Step: n, Type: fmt.Sprintf("step %s", f.Owner), Time: t0},
		},
	}
	if more != nil {
		more(&p)
	}
	return p
}

// written is everything a checkpoint may write for a run.
type written struct {
	Run       store.Run
	Messages  []store.Message
	Events    []store.Event
	Outbox    []store.OutboxMessage
	Approvals []store.Approval
	Effects   []store.Effect
}

func writtenFor(t *testing.T, s *Store, r store.Run) written {
	t.Helper()
	ctx := t.Context()
	var (
		w   written
		err error
	)
	if w.Run, err = s.GetRun(ctx, "", r.ID); err != nil {
		t.Fatal(err)
	}
	if w.Messages, err = s.Messages(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if w.Events, err = s.Events(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if w.Outbox, err = s.Outbox(ctx, r.ID); err != nil {
		t.Fatal(err)
	}
	if w.Approvals, err = s.Approvals(ctx, store.ListApprovalsParams{RunID: r.ID}); err != nil {
		t.Fatal(err)
	}
	if w.Effects, err = s.Effects(ctx, "", r.ID); err != nil {
		t.Fatal(err)
	}
	return w
}

func requests(t *testing.T, ps []store.CheckpointParams) []*checkpointRequest {
	rs := make([]*checkpointRequest, len(ps))
	for i, p := range ps {
		rs[i] = &checkpointRequest{ctx: t.Context(), p: p, j: sqlrow.NewJournalEntry(p.Now, p.Messages, p.Events), err: make(chan error, 1)}
	}
	return rs
}

// writeBatch writes checkpoints as one batch of the store's writer, as if
// they had been made at once.
func writeBatch(t *testing.T, s *Store, ps []store.CheckpointParams) []error {
	t.Helper()
	errs := make([]error, len(ps))
	s.checkpoints.write(requests(t, ps), errs)
	return errs
}

// Checkpoints of runs of two tenants, written in one statement: those whose
// fence holds are written in full; those fenced off (another epoch, another
// owner, a released lease, an ended run, a lease kept by a run no longer
// running) are reported and write nothing of what they carry.
func TestCheckpointGroup(t *testing.T) {
	t.Parallel()
	s := openTest(t, Config{MaxConns: 4})
	ctx := t.Context()
	var runs []store.Run
	for i := range 10 {
		runs = append(runs, claimIn(t, s, fmt.Sprintf("run-%02d", i), fmt.Sprintf("t%d", i%2), "w1"))
	}
	// run-06 is taken over by w2; run-07 has ended, its owner still named;
	// run-08 let go of its lease; run-09 waits for approval, still leased.
	taken, err := s.TakeOver(ctx, store.TakeOverParams{RunID: runs[6].ID, Epoch: runs[6].LeaseEpoch, Owner: "w2", Now: t0, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i, st := range map[int]store.Status{7: store.StatusDone, 8: store.StatusQueued, 9: store.StatusWaitingApproval} {
		p := stepOf(runs[i], fenceOf(runs[i]), 1, nil)
		p.Run.Status, p.Run.KeepLease = st, false
		if st == store.StatusQueued {
			p.Run.LeaseExpires = time.Time{}
		}
		if err := s.Checkpoint(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{1, 5} {
		if _, _, err := s.BeginEffect(ctx, store.BeginEffectParams{Fence: fenceOf(runs[i]), Now: t0,
			Effect: store.Effect{Tenant: runs[i].Tenant, Key: "key-" + runs[i].ID, RunID: runs[i].ID, Tool: "refund", ArgsHash: "h", Args: json.RawMessage(`{}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	carries := func(r store.Run) func(*store.CheckpointParams) {
		return func(p *store.CheckpointParams) {
			p.Effects = []store.EffectUpdate{{Tenant: r.Tenant, Key: "key-" + r.ID, State: store.EffectDone, Result: json.RawMessage(`{"ok":true}`)}}
			p.Outbox = []store.OutboxMessage{{Kind: "approval_requested", Payload: json.RawMessage(`{"n":1}`)}, {Kind: "escalation", Payload: json.RawMessage(`{"n":2}`)}}
			p.Approvals = []store.Approval{{ID: "appr-" + r.ID, Step: 2, ToolUseID: "tu", Tool: "refund", Args: json.RawMessage(`{}`),
				ArgsHash: "h", Reason: "r", Category: "c", Summary: "s", PolicyVersion: "v1", Binding: "b", ExpiresAt: t0.Add(time.Hour)}}
		}
	}
	// letGo makes a checkpoint one that does not keep the lease, whose
	// fence admits any status but the ended ones.
	letGo := func(more func(*store.CheckpointParams)) func(*store.CheckpointParams) {
		return func(p *store.CheckpointParams) {
			more(p)
			p.Run.KeepLease = false
		}
	}
	stale := fenceOf(runs[4])
	stale.Epoch--
	wrongOwner := fenceOf(runs[5])
	wrongOwner.Owner = "w9"
	released := fenceOf(runs[8])
	released.Owner = ""
	ps := []store.CheckpointParams{
		stepOf(runs[0], fenceOf(runs[0]), 2, nil),
		stepOf(runs[1], fenceOf(runs[1]), 2, carries(runs[1])),
		stepOf(runs[2], fenceOf(runs[2]), 2, func(p *store.CheckpointParams) {
			// Lets go of a run still due: idle workers are woken.
			p.Run.KeepLease, p.Run.LeaseExpires = false, time.Time{}
		}),
		stepOf(runs[3], fenceOf(runs[3]), 2, func(p *store.CheckpointParams) {
			p.Run.Status, p.Run.KeepLease, p.Run.LeaseExpires, p.Run.Final = store.StatusDone, false, time.Time{}, "answer"
			p.Outbox = []store.OutboxMessage{{Kind: "run_finished", Payload: json.RawMessage(`{}`)}}
		}),
		stepOf(runs[4], stale, 2, carries(runs[4])),
		stepOf(runs[5], wrongOwner, 2, carries(runs[5])),
		stepOf(runs[6], fenceOf(runs[6]), 2, carries(runs[6])),
		stepOf(runs[7], fenceOf(runs[7]), 2, letGo(carries(runs[7]))),
		stepOf(runs[8], released, 2, letGo(carries(runs[8]))),
		stepOf(runs[9], fenceOf(runs[9]), 2, carries(runs[9])),
	}
	fencedOff := map[int]bool{4: true, 5: true, 6: true, 7: true, 8: true, 9: true}
	before := make([]written, len(runs))
	for i, r := range runs {
		before[i] = writtenFor(t, s, r)
	}

	wake, err := s.Wakeups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	outcome, err := s.checkpointGroup(requests(t, ps))
	if err != nil {
		t.Fatal(err)
	}
	held := make([]bool, len(outcome))
	for i, o := range outcome {
		held[i] = o == fenceHeld
	}
	awaitWake(t, wake, "a batch letting go of a running run")

	for i, ok := range held {
		if ok == fencedOff[i] {
			t.Errorf("checkpoint of %s: fence held %v, want %v", runs[i].ID, ok, !fencedOff[i])
		}
	}
	for i, r := range runs {
		got := writtenFor(t, s, r)
		if fencedOff[i] {
			if !reflect.DeepEqual(got, before[i]) {
				t.Errorf("fenced-off checkpoint of %s wrote:\n%+v\nwas:\n%+v", r.ID, got, before[i])
			}
			continue
		}
		if got.Run.Step != 2 || got.Run.Messages != 2 || string(got.Run.Guard) != `{"step":2}` || !got.Run.UpdatedAt.Equal(ps[i].Now) {
			t.Errorf("run %s after its checkpoint: step %d, messages %d, guard %s, updated %v", r.ID, got.Run.Step, got.Run.Messages, got.Run.Guard, got.Run.UpdatedAt)
		}
		if n := len(got.Messages); n != 1 || got.Messages[0].Seq != 1 || string(got.Messages[0].Content) != `"w1 2"` {
			t.Errorf("messages of %s: %+v", r.ID, got.Messages)
		}
		if evs := got.Events[len(before[i].Events):]; len(evs) != 2 || evs[0].Type != "model_call w1" || evs[1].Type != "step w1" || evs[1].Data != nil {
			t.Errorf("events of %s: %+v", r.ID, evs)
		}
	}
	if w := writtenFor(t, s, runs[1]); len(w.Outbox) != 2 || w.Outbox[0].Kind != "approval_requested" || w.Outbox[1].Kind != "escalation" ||
		w.Outbox[0].Tenant != "t1" || len(w.Approvals) != 1 || w.Approvals[0].Tenant != "t1" || w.Approvals[0].Status != store.ApprovalPending ||
		len(w.Effects) != 1 || w.Effects[0].State != store.EffectDone || string(w.Effects[0].Result) != `{"ok":true}` {
		t.Errorf("run-01 carried an effect, two notifications and an approval; wrote %+v, %+v, %+v", w.Outbox, w.Approvals, w.Effects)
	}
	if w := writtenFor(t, s, runs[2]); w.Run.Status != store.StatusRunning || w.Run.LeaseOwner != "" || !w.Run.LeaseExpires.IsZero() {
		t.Errorf("released run-02: status %s, owner %q, expires %v", w.Run.Status, w.Run.LeaseOwner, w.Run.LeaseExpires)
	}
	if w := writtenFor(t, s, runs[3]); w.Run.Status != store.StatusDone || w.Run.Final != "answer" || len(w.Outbox) != 1 {
		t.Errorf("finished run-03: status %s, final %q, outbox %+v", w.Run.Status, w.Run.Final, w.Outbox)
	}
	if w := writtenFor(t, s, runs[0]); w.Run.LeaseOwner != "w1" || !w.Run.LeaseExpires.Equal(runs[0].LeaseExpires) {
		t.Errorf("run-00 kept its lease: owner %q, expires %v, was %v", w.Run.LeaseOwner, w.Run.LeaseExpires, runs[0].LeaseExpires)
	}
	if got := writtenFor(t, s, taken); got.Run.LeaseOwner != "w2" || got.Run.LeaseEpoch != taken.LeaseEpoch {
		t.Errorf("run-06 taken over: owner %q, epoch %d", got.Run.LeaseOwner, got.Run.LeaseEpoch)
	}
}

// A batch one of whose checkpoints fails (a message rewritten, an effect
// never begun) is written again a checkpoint at a time: each gets its own
// outcome, and the failed and fenced-off ones write nothing. So does a
// second checkpoint of a run in the same batch.
func TestCheckpointGroupFallback(t *testing.T) {
	t.Parallel()
	s := openTest(t, Config{MaxConns: 4})
	var runs []store.Run
	for i := range 5 {
		runs = append(runs, claimIn(t, s, fmt.Sprintf("run-%d", i), "t", "w1"))
	}
	for _, r := range runs {
		if err := s.Checkpoint(t.Context(), stepOf(r, fenceOf(r), 1, nil)); err != nil {
			t.Fatal(err)
		}
	}
	stale := fenceOf(runs[2])
	stale.Epoch++
	ps := []store.CheckpointParams{
		stepOf(runs[0], fenceOf(runs[0]), 2, nil),
		stepOf(runs[1], fenceOf(runs[1]), 1, nil), // message 0 again
		stepOf(runs[2], stale, 2, nil),
		stepOf(runs[3], fenceOf(runs[3]), 2, func(p *store.CheckpointParams) {
			p.Effects = []store.EffectUpdate{{Tenant: "t", Key: "never-begun", State: store.EffectDone}}
		}),
		stepOf(runs[4], fenceOf(runs[4]), 2, nil),
		stepOf(runs[4], fenceOf(runs[4]), 3, nil),
		stepOf(runs[0], stale, 3, nil),
	}
	before := make([]written, len(runs))
	for i, r := range runs {
		before[i] = writtenFor(t, s, r)
	}

	errs := writeBatch(t, s, ps)

	for i, ok := range []bool{true, false, false, false, true, true, false} {
		if ok != (errs[i] == nil) {
			t.Errorf("checkpoint %d of %s: %v, want success %v", i, ps[i].Fence.RunID, errs[i], ok)
		}
	}
	if !strings.Contains(fmt.Sprint(errs[1]), "append-only") || errors.Is(errs[1], store.ErrLeaseLost) {
		t.Errorf("message rewritten: %v", errs[1])
	}
	if !errors.Is(errs[2], store.ErrLeaseLost) || !errors.Is(errs[6], store.ErrLeaseLost) {
		t.Errorf("fenced off: %v, %v; want ErrLeaseLost", errs[2], errs[6])
	}
	if !errors.Is(errs[3], store.ErrNotFound) {
		t.Errorf("effect never begun: %v, want ErrNotFound", errs[3])
	}
	for _, i := range []int{1, 2, 3} {
		if got := writtenFor(t, s, runs[i]); !reflect.DeepEqual(got, before[i]) {
			t.Errorf("failed checkpoint of %s wrote:\n%+v\nwas:\n%+v", runs[i].ID, got, before[i])
		}
	}
	if got := writtenFor(t, s, runs[0]); got.Run.Step != 2 || len(got.Messages) != 2 {
		t.Errorf("run-0: step %d, %d messages; want 2, 2", got.Run.Step, len(got.Messages))
	}
	if got := writtenFor(t, s, runs[4]); got.Run.Step != 3 || len(got.Messages) != 3 || len(got.Events) != 6 {
		t.Errorf("run-4, checkpointed twice in the batch: step %d, %d messages, %d events; want 3, 3, 6", got.Run.Step, len(got.Messages), len(got.Events))
	}
}

// Many runs checkpoint at once, each also under a stale fence: every
// checkpoint gets its own outcome, and the stale ones write nothing.
func TestCheckpointGroupConcurrent(t *testing.T) {
	t.Parallel()
	s := openTest(t, Config{MaxConns: 4})
	const runCount, steps = 48, 6
	var runs []store.Run
	for i := range runCount {
		runs = append(runs, claimIn(t, s, fmt.Sprintf("run-%02d", i), fmt.Sprintf("t%d", i%3), "w1"))
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			<-start
			for n := 1; n <= steps; n++ {
				if err := s.Checkpoint(t.Context(), stepOf(r, fenceOf(r), n, nil)); err != nil {
					t.Errorf("checkpoint %d of %s: %v", n, r.ID, err)
					return
				}
			}
		})
		// Stale writers: an older epoch, another owner.
		for _, f := range []store.Fence{{RunID: r.ID, Owner: "w1", Epoch: r.LeaseEpoch - 1}, {RunID: r.ID, Owner: "w0", Epoch: r.LeaseEpoch}} {
			wg.Go(func() {
				<-start
				for n := 1; n <= steps; n++ {
					err := s.Checkpoint(t.Context(), stepOf(r, f, n+steps, func(p *store.CheckpointParams) {
						p.Outbox = []store.OutboxMessage{{Kind: "stale", Payload: json.RawMessage(`{}`)}}
					}))
					if !errors.Is(err, store.ErrLeaseLost) {
						t.Errorf("stale checkpoint %d of %s under %+v: %v, want ErrLeaseLost", n, r.ID, f, err)
						return
					}
				}
			})
		}
	}
	close(start)
	wg.Wait()
	for _, r := range runs {
		got := writtenFor(t, s, r)
		if got.Run.Step != steps || got.Run.LeaseOwner != "w1" || len(got.Messages) != steps || len(got.Events) != 2*steps || len(got.Outbox) != 0 {
			t.Errorf("%s: step %d, owner %q, %d messages, %d events, %d notifications; want %d, w1, %d, %d, 0",
				r.ID, got.Run.Step, got.Run.LeaseOwner, len(got.Messages), len(got.Events), len(got.Outbox), steps, steps, 2*steps)
		}
		for i, m := range got.Messages {
			if m.Seq != i || string(m.Content) != fmt.Sprintf(`"w1 %d"`, i+1) {
				t.Errorf("%s message %d: seq %d, %s", r.ID, i, m.Seq, m.Content)
			}
		}
		for i, e := range got.Events {
			if want := []string{"model_call w1", "step w1"}[i%2]; e.Type != want || e.Step != i/2+1 {
				t.Errorf("%s event %d: %s of step %d, want %s of step %d", r.ID, i, e.Type, e.Step, want, i/2+1)
			}
		}
	}
}

// A checkpoint made after Close fails; the writers have exited (goleak in
// TestMain checks).
func TestCheckpointAfterClose(t *testing.T) {
	t.Parallel()
	s := openTest(t, Config{MaxConns: 2})
	r := claimIn(t, s, "run-1", "t", "w1")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Checkpoint(t.Context(), stepOf(r, fenceOf(r), 1, nil)); !errors.Is(err, ErrClosed) {
		t.Errorf("Checkpoint after Close: %v, want ErrClosed", err)
	}
}

// A checkpoint whose caller gives up is either not written, and the caller
// hears its context's error, or written, and the caller hears the outcome:
// never "canceled" for a checkpoint that committed. Three checkpoints wait
// on rows another transaction holds: one written alone, one still queued,
// one in a writer's batch; then their callers give up.
func TestCheckpointGivenUpOnIsWaitedForOnceWritten(t *testing.T) {
	s := openTest(t, Config{MaxConns: 8})
	ctx := t.Context()
	alone, queued, inBatch, held := claimIn(t, s, "r-alone", "t", "w1"), claimIn(t, s, "r-queued", "t", "w1"),
		claimIn(t, s, "r-in-batch", "t", "w1"), claimIn(t, s, "r-held", "t", "w1")
	batch := []store.Run{held, inBatch}
	for i := range checkpointHelperMin - 2 {
		batch = append(batch, claimIn(t, s, fmt.Sprintf("r-fill-%02d", i), "t", "w1"))
	}
	blocker, err := pgx.Connect(ctx, testDB.url)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close(context.Background())
	tx, err := blocker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	runs := pgx.Identifier{s.schema, "runs"}.Sanitize()
	if _, err := tx.Exec(ctx, "SELECT 1 FROM "+runs+" WHERE id IN ('r-alone', 'r-held') FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	waitFor := func(what string, cond func(busy, queued int) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			s.checkpoints.mu.Lock()
			ok := cond(s.checkpoints.busy, len(s.checkpoints.queue))
			s.checkpoints.mu.Unlock()
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("never %s", what)
			}
		}
	}
	checkpoint := func(ctx context.Context, r store.Run) <-chan error {
		done := make(chan error, 1)
		go func() { done <- s.Checkpoint(ctx, stepOf(r, fenceOf(r), 1, nil)) }()
		return done
	}

	aloneCtx, giveUpAlone := context.WithCancel(ctx)
	aloneDone := checkpoint(aloneCtx, alone)
	waitFor("written alone", func(busy, q int) bool { return busy == 1 && q == 0 })

	queuedCtx, giveUpQueued := context.WithCancel(ctx)
	queuedDone := checkpoint(queuedCtx, queued)
	waitFor("queued", func(busy, q int) bool { return q == 1 })
	giveUpQueued()
	if err := <-queuedDone; !errors.Is(err, context.Canceled) {
		t.Errorf("queued checkpoint given up on: %v, want context.Canceled", err)
	}

	batchCtx, giveUpInBatch := context.WithCancel(ctx)
	var others []<-chan error
	for _, r := range batch {
		c := ctx
		if r.ID == inBatch.ID {
			c = batchCtx
		}
		others = append(others, checkpoint(c, r))
	}
	waitFor("taken as a batch", func(busy, q int) bool { return busy == 2 && q == 0 })
	giveUpAlone()
	giveUpInBatch()
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-aloneDone; err != nil {
		t.Errorf("checkpoint written alone, given up on: %v, want its outcome (committed)", err)
	}
	for i, done := range others {
		if err := <-done; err != nil {
			t.Errorf("checkpoint of %s in the batch: %v, want its outcome (committed)", batch[i].ID, err)
		}
	}
	for r, want := range map[string]int{"r-alone": 1, "r-in-batch": 1, "r-queued": 0} {
		got, err := s.GetRun(ctx, "t", r)
		if err != nil {
			t.Fatal(err)
		}
		if got.Step != want {
			t.Errorf("%s at step %d, want %d", r, got.Step, want)
		}
	}
}

// A run whose row another transaction holds (a decision, a claim, another
// process's write) does not hold up the checkpoints of the other runs of a
// batch: they commit while it waits, and it is written once its row is let
// go.
func TestCheckpointGroupIsNotHeldUpByOneRun(t *testing.T) {
	t.Parallel()
	s := openTest(t, Config{MaxConns: 4})
	ctx := t.Context()
	var runs []store.Run
	for i := range 3 {
		runs = append(runs, claimIn(t, s, fmt.Sprintf("hol-%d", i), "t1", "w1"))
	}
	ps := make([]store.CheckpointParams, len(runs))
	for i, r := range runs {
		ps[i] = stepOf(r, fenceOf(r), 1, nil)
	}

	// Another transaction holds hol-1's row.
	holder, err := testDB.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(ctx)
	if _, err := holder.Exec(ctx, "SELECT 1 FROM "+pgx.Identifier{s.schema, "runs"}.Sanitize()+" WHERE id = 'hol-1' FOR NO KEY UPDATE"); err != nil {
		t.Fatal(err)
	}

	errs := make([]error, len(ps))
	done := make(chan struct{})
	go func() {
		s.checkpoints.write(requests(t, ps), errs)
		close(done)
	}()
	// hol-0 and hol-2 are written while hol-1's row is still held.
	testrun.WaitFor(t, "the other runs' checkpoints, while one run's row is held", func() bool {
		for _, id := range []string{"hol-0", "hol-2"} {
			if r, err := s.GetRun(ctx, "", id); err != nil || r.Step != 1 {
				return false
			}
		}
		return true
	})
	if r, err := s.GetRun(ctx, "", "hol-1"); err != nil || r.Step != 0 {
		t.Fatalf("hol-1 written while its row was held: step %d, %v", r.Step, err)
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	for i, err := range errs {
		if err != nil {
			t.Errorf("checkpoint of %s: %v", runs[i].ID, err)
		}
	}
	if r, err := s.GetRun(ctx, "", "hol-1"); err != nil || r.Step != 1 {
		t.Errorf("hol-1 once its row was let go: step %d, %v; want 1", r.Step, err)
	}
}
