package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var t0 = time.Date(2025, 3, 14, 15, 9, 26, 0, time.UTC)

// claimOne creates a run and claims one due run, which is that run unless
// other goroutines are doing the same.
func claimOne(t testing.TB, s *Store, id string) store.Run {
	t.Helper()
	ctx := t.Context()
	if _, _, err := s.CreateRun(ctx, store.CreateRunParams{ID: id, Tenant: "t", Agent: "a", Now: t0}); err != nil {
		t.Fatal(err)
	}
	runs, err := s.ClaimRuns(ctx, store.ClaimRunsParams{Owner: id, Now: t0, TTL: time.Hour, Limit: 1})
	if err != nil || len(runs) != 1 {
		t.Fatalf("claim: %v, %v", runs, err)
	}
	return runs[0]
}

// step checkpoints the i-th step of a claimed run.
func step(ctx context.Context, s *Store, r store.Run, i int) error {
	return s.Checkpoint(ctx, store.CheckpointParams{
		Fence: store.Fence{RunID: r.ID, Owner: r.LeaseOwner, Epoch: r.LeaseEpoch},
		Now:   t0.Add(time.Duration(i)),
		Run: store.RunUpdate{
			Status: store.StatusRunning, Step: i + 1, Messages: i + 1,
			Guard:        json.RawMessage(`{"turns":1}`),
			LeaseExpires: t0.Add(time.Hour),
		},
		Messages: []store.Message{{Seq: i, Step: i + 1, Role: "assistant", Content: []byte(`[{"type":"text","text":"ok"}]`), CreatedAt: t0}},
		Events:   []store.Event{{Step: i + 1, Type: "step", Time: t0, Data: json.RawMessage(`{}`)}},
	})
}

func TestGroupCommit(t *testing.T) {
	t.Parallel()
	s := openTest(t, filepath.Join(t.TempDir(), "belay.db"))
	const runs, steps = 64, 4
	claimed := make([]store.Run, runs)
	for i := range claimed {
		claimed[i] = claimOne(t, s, fmt.Sprintf("run-%02d", i))
	}
	before := s.WriterStats()

	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, r := range claimed {
		wg.Go(func() {
			<-start
			for i := range steps {
				if err := step(t.Context(), s, r, i); err != nil {
					t.Errorf("Checkpoint: %v", err)
				}
			}
		})
	}
	close(start)
	wg.Wait()

	st := s.WriterStats()
	commits, writes := st.Commits-before.Commits, st.Writes-before.Writes
	if writes != runs*steps {
		t.Errorf("writes %d, want %d", writes, runs*steps)
	}
	if commits >= writes {
		t.Errorf("%d commits for %d writes: no batching", commits, writes)
	}
	t.Logf("%d checkpoints in %d commits", writes, commits)
	if st.BytesWritten <= before.BytesWritten {
		t.Errorf("BytesWritten did not grow: %d", st.BytesWritten)
	}
	size, err := s.Size(t.Context())
	if err != nil {
		t.Fatalf("Size: %v", err)
	}
	if size < 4096 {
		t.Errorf("Size %d: smaller than a page", size)
	}
}

// Two processes share one file: each has its own writer, and neither may see
// "database is locked".
func TestTwoStoresOneFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "belay.db")
	stores := []*Store{openTest(t, path), openTest(t, path)}

	const runsEach, steps = 16, 3
	var wg sync.WaitGroup
	for si, s := range stores {
		for i := range runsEach {
			wg.Go(func() {
				ctx := t.Context()
				id := fmt.Sprintf("run-%d-%02d", si, i)
				if _, _, err := s.CreateRun(ctx, store.CreateRunParams{ID: id, Tenant: "t", Agent: "a", Now: t0}); err != nil {
					t.Errorf("CreateRun: %v", err)
					return
				}
				// Each goroutine created a run before claiming, so one is
				// always due.
				runs, err := s.ClaimRuns(ctx, store.ClaimRunsParams{Owner: id, Now: t0, TTL: time.Hour, Limit: 1})
				if err != nil || len(runs) != 1 {
					t.Errorf("ClaimRuns: %v, %v; want one run", ids(runs), err)
					return
				}
				for j := range steps {
					if err := step(ctx, s, runs[0], j); err != nil {
						t.Errorf("Checkpoint: %v", err)
					}
				}
			})
		}
	}
	wg.Wait()

	// Every run was created once and claimed once, by whichever process
	// came first.
	all, err := stores[1].ListRuns(t.Context(), store.ListRunsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2*runsEach {
		t.Errorf("%d runs, want %d", len(all), 2*runsEach)
	}
	for _, r := range all {
		if r.LeaseEpoch != 1 || r.Step != steps {
			t.Errorf("run %s: epoch %d, step %d; want 1, %d", r.ID, r.LeaseEpoch, r.Step, steps)
		}
	}
}

func ids(runs []store.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

func TestWriteContext(t *testing.T) {
	t.Parallel()
	s := openTest(t, filepath.Join(t.TempDir(), "belay.db"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := s.CreateRun(ctx, store.CreateRunParams{ID: "r1", Tenant: "t", Now: t0})
	if !errors.Is(err, ctx.Err()) {
		t.Errorf("CreateRun with a canceled context: %v", err)
	}
	if _, err := s.GetRun(t.Context(), "", "r1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetRun: %v, want ErrNotFound", err)
	}
}

func BenchmarkCheckpoint(b *testing.B) {
	s := openTest(b, filepath.Join(b.TempDir(), "belay.db"))
	var n atomic.Int64
	// Many runs checkpoint at once, as on a busy worker; with one goroutine
	// per CPU there would be nothing to batch.
	b.SetParallelism(16)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := claimOne(b, s, fmt.Sprintf("run-%d", n.Add(1)))
		for i := 0; pb.Next(); i++ {
			if err := step(b.Context(), s, r, i); err != nil {
				b.Error(err)
				return
			}
		}
	})
	st := s.WriterStats()
	b.ReportMetric(float64(st.Writes)/float64(max(st.Commits, 1)), "writes/commit")
}

func TestBatchFails(t *testing.T) {
	t.Parallel()
	s := openTest(t, filepath.Join(t.TempDir(), "belay.db"))
	ctx := t.Context()
	insert := func(id string) *request {
		return &request{ctx: ctx, fn: func(ctx context.Context, tx *writeTx) error {
			_, err := tx.ExecContext(ctx, runInsertSQL,
				sql.Named("id", id), sql.Named("tenant", "t"), sql.Named("user", ""),
				sql.Named("client_request_id", ""), sql.Named("agent", "a"), sql.Named("agent_version", ""),
				sql.Named("input", ""), sql.Named("dry_run", false), sql.Named("requested_by", ""), sql.Named("budget", nil), sql.Named("sensitive", nil),
				sql.Named("concurrency_key", ""), sql.Named("concurrency_limit", 0), sql.Named("priority", 0), sql.Named("not_before", int64(0)), sql.Named("now", sqlrow.Nanos(t0)))
			return err
		}}
	}
	boom := errors.New("boom")
	fails := &request{ctx: ctx, fn: func(ctx context.Context, tx *writeTx) error { return boom }}
	// Ending the transaction under the writer makes the batch fail as a
	// whole, as SQLite does on SQLITE_FULL.
	aborts := &request{ctx: ctx, fn: func(ctx context.Context, tx *writeTx) error {
		tx.ExecContext(ctx, "ROLLBACK")
		return boom
	}}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	skipped := insert("skipped")
	skipped.ctx = canceled

	// A request that fails after writing: its write must be undone, the
	// others' kept (the batch is redone with savepoints).
	half := insert("half")
	halfWrite := half.fn
	half.fn = func(ctx context.Context, tx *writeTx) error {
		if err := halfWrite(ctx, tx); err != nil {
			return err
		}
		return boom
	}

	// The writer goroutine is idle, waiting for requests, so the batch can
	// be run here.
	batch := []*request{insert("kept"), fails, skipped, half, insert("kept2")}
	errs := make([]error, len(batch))
	s.writer.commit(batch, errs)
	if errs[0] != nil || errs[1] != boom || !errors.Is(errs[2], context.Canceled) || errs[3] != boom || errs[4] != nil {
		t.Errorf("batch with failing requests: %v", errs)
	}

	batch = []*request{insert("lost"), aborts, insert("lost2")}
	errs = make([]error, len(batch))
	s.writer.commit(batch, errs)
	for i, err := range errs {
		if err == nil {
			t.Errorf("request %d of an aborted batch: no error", i)
		}
	}

	for id, want := range map[string]bool{"kept": true, "kept2": true, "skipped": false, "half": false, "lost": false, "lost2": false} {
		_, err := s.GetRun(ctx, "", id)
		if got := err == nil; got != want {
			t.Errorf("run %s written %v, want %v (%v)", id, got, want, err)
		}
	}
}

// A batch whose callers all gave up before their turn commits nothing and
// counts no commit.
func TestBatchOfCallersWhoGaveUp(t *testing.T) {
	t.Parallel()
	s := openTest(t, filepath.Join(t.TempDir(), "belay.db"))
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	before := s.WriterStats()
	batch := []*request{{ctx: canceled, fn: func(context.Context, *writeTx) error {
		t.Error("a request whose caller gave up ran")
		return nil
	}}}
	errs := make([]error, len(batch))
	// The writer goroutine is idle, waiting for requests, so the batch can
	// be run here.
	s.writer.commit(batch, errs)
	if !errors.Is(errs[0], context.Canceled) {
		t.Errorf("request of a caller who gave up: %v, want context.Canceled", errs[0])
	}
	if after := s.WriterStats(); after != before {
		t.Errorf("stats %+v after a batch that wrote nothing, want %+v", after, before)
	}
}

// flipCtx is live when the writer first looks and gone when it looks again:
// a caller that gives up between a batch's first run and its redo.
type flipCtx struct {
	context.Context
	calls atomic.Int32
}

func (c *flipCtx) Err() error {
	if c.calls.Add(1) == 1 {
		return nil
	}
	return context.Canceled
}
func (c *flipCtx) Done() <-chan struct{} { return nil }

type requestName struct{}

// A batch run again after one of its requests failed runs each request
// afresh: BeginEffect reports what the second run found, not the first.
// Here the first run of b finds a's intent; a gives up before the redo, so
// b's second run records the intent itself and must say it is new.
func TestBeginEffectRedoneReportsWhatItFound(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "belay.db"))
	run := claimOne(t, s, "r1")
	fence := store.Fence{RunID: run.ID, Owner: run.LeaseOwner, Epoch: run.LeaseEpoch}
	// This test plays the writer goroutine's part, so the batch is known.
	w := s.writer
	close(w.stop)
	<-w.done
	w.stop = make(chan struct{})
	w.turns.stop = w.stop
	begin := func(ctx context.Context, res chan<- bool) {
		_, existed, _ := s.BeginEffect(ctx, store.BeginEffectParams{Fence: fence, Now: t0,
			Effect: store.Effect{Tenant: "t", Key: "k", RunID: run.ID, Tool: "refund", ArgsHash: "h", Args: []byte(`{}`)}})
		res <- existed
	}
	aRes, bRes, cErr := make(chan bool, 1), make(chan bool, 1), make(chan error, 1)
	go begin(&flipCtx{Context: context.WithValue(t.Context(), requestName{}, "a")}, aRes)
	go begin(context.WithValue(t.Context(), requestName{}, "b"), bRes)
	go func() { // fenced off: makes the writer run the batch again
		cErr <- s.Checkpoint(context.WithValue(t.Context(), requestName{}, "c"), store.CheckpointParams{
			Fence: store.Fence{RunID: run.ID, Owner: "someone else", Epoch: 9}, Now: t0,
			Run: store.RunUpdate{Status: store.StatusRunning, LeaseExpires: t0.Add(time.Hour)}})
	}()
	by := map[string]*request{}
	for range 3 {
		r := <-w.requests
		by[r.ctx.Value(requestName{}).(string)] = r
	}
	batch := []*request{by["a"], by["b"], by["c"]}
	errs := make([]error, 3)
	w.commit(batch, errs)
	for i, r := range batch {
		r.err <- errs[i]
	}
	<-aRes
	if err := <-cErr; !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("checkpoint: %v, want ErrLeaseLost", err)
	}
	existed := <-bRes
	es, err := s.Effects(t.Context(), "t", run.ID)
	if err != nil || len(es) != 1 {
		t.Fatalf("effects %v, %v", es, err)
	}
	if existed && es[0].Attempts == 1 {
		t.Errorf("BeginEffect recorded a new intent (attempts %d) but reported existed", es[0].Attempts)
	}
}

// A caller whose context ends once the writer has taken its request hears
// the request's outcome, never a context error for a write that committed.
// Here the context ends while the request runs, so both the reply and the
// context are ready when do looks: before, it picked one at random.
func TestWriteTakenIsWaitedFor(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "belay.db"))
	for i := range 50 {
		ctx, cancel := context.WithCancel(t.Context())
		err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
			cancel()
			_, err := tx.ExecContext(ctx, "INSERT INTO kill_switches (tenant, engaged, reason, updated_at) VALUES (?, 1, '', 0)", fmt.Sprint("t", i))
			return err
		})
		if err != nil {
			t.Fatalf("write %d, committed after its context ended: %v", i, err)
		}
	}
	// A request whose context ended before the writer took it is not
	// written at all.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	ran := false
	if err := s.writer.do(ctx, 0, func(context.Context, *writeTx) error { ran = true; return nil }); !errors.Is(err, context.Canceled) || ran {
		t.Errorf("write with an ended context: %v, ran %v; want context.Canceled and not run", err, ran)
	}
}
