package belay

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

func openStore(t testing.TB) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// clock is a test clock that moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// allowAll is the policy of tests about something other than approvals.
func allowAll(context.Context, PolicyCall) (Decision, error) { return Decision{Verdict: Allow}, nil }

// newRuntime returns a runtime over st. Agents without a policy get
// allowAll, so that tests of the ledger, guards and leases are not gated;
// approval tests set their policy.
func newRuntime(t testing.TB, st store.Store, c *clock, agents ...*Agent) *Runtime {
	t.Helper()
	for _, a := range agents {
		if a.Policy == nil {
			a.Policy, a.PolicyVersion = allowAll, "allow-all"
		}
	}
	cfg := Config{Store: st, Agents: agents}
	if c != nil {
		cfg.now = c.Now
	}
	rt, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

type lookupIn struct {
	ID string `json:"id" jsonschema:"the record to look up"`
}

type lookupOut struct {
	ID    string `json:"id"`
	Value string `json:"value"`
}

func lookupTool() Tool {
	return NewTool("lookup", "look up a record", Read, func(ctx context.Context, in lookupIn) (lookupOut, error) {
		return lookupOut{ID: in.ID, Value: "value of " + in.ID}, nil
	})
}

func startAndDrain(t *testing.T, rt *Runtime, req RunRequest) store.Run {
	t.Helper()
	ctx := context.Background()
	run, _, err := rt.StartRun(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	run, err = rt.store.GetRun(ctx, "", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func loadMessages(t *testing.T, st store.Store, runID string) []model.Message {
	t.Helper()
	rows, err := st.Messages(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []model.Message
	for _, r := range rows {
		blocks, err := model.DecodeBlocks(r.Content)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, model.Message{Role: model.Role(r.Role), Content: blocks})
	}
	return msgs
}

func eventTypes(t *testing.T, st store.Store, runID string) []string {
	t.Helper()
	events, err := st.Events(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	return types
}

func TestRunCompletesAndRecordsEverything(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	agent := &Agent{Name: "a", Model: scripted.New(
		scripted.Reply{Text: "PLAN: lookup; answer", Calls: []scripted.Call{{Name: "lookup", Args: map[string]string{"id": "A-1"}}}},
		scripted.Reply{Text: "A-1 has value of A-1"},
	), Tools: []Tool{lookupTool()}, Prices: scripted.Prices}
	run := startAndDrain(t, newRuntime(t, st, nil, agent), RunRequest{Agent: "a", User: "u", Input: "what is A-1?"})

	if run.Status != store.StatusDone || run.Final != "A-1 has value of A-1" {
		t.Fatalf("run ended %s with %q", run.Status, run.Final)
	}
	if run.Step != 1 || run.ModelCalls != 2 || run.Messages != 4 {
		t.Errorf("step %d, model calls %d, messages %d; want 1, 2, 4", run.Step, run.ModelCalls, run.Messages)
	}
	if run.InputTokens == 0 || run.OutputTokens == 0 {
		t.Errorf("usage not recorded: %d in, %d out", run.InputTokens, run.OutputTokens)
	}
	want := scripted.Prices[scripted.Name].Cost(model.Usage{InputTokens: run.InputTokens, OutputTokens: run.OutputTokens})
	if model.Nanodollars(run.CostNanoUSD) != want {
		t.Errorf("cost %d, want %d", run.CostNanoUSD, want)
	}
	var plan planState
	if err := json.Unmarshal(run.Plan, &plan); err != nil || strings.Join(plan.Steps, ",") != "lookup,answer" || plan.Version != 1 {
		t.Errorf("plan %s (%v)", run.Plan, err)
	}
	msgs := loadMessages(t, st, run.ID)
	res := msgs[2].Content[0]
	if res.Type != model.TypeToolResult || res.IsError || !strings.Contains(res.Content, "value of A-1") || res.ToolUseID != msgs[1].Content[1].ID {
		t.Errorf("tool result %#v", res)
	}
	got := strings.Join(eventTypes(t, st, run.ID), " ")
	if want := "run_created claimed model_call tool_call tool_result checkpoint model_call stop"; got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
}

func TestStartRunIsIdempotentPerClientRequest(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	rt := newRuntime(t, st, nil, &Agent{Name: "a", Model: scripted.New()})
	ctx := context.Background()
	req := RunRequest{Agent: "a", Tenant: "acme", User: "u-1", ClientRequestID: "req-1", Input: "hi"}
	first, created, err := rt.StartRun(ctx, req)
	if err != nil || !created {
		t.Fatalf("first start: created %v, %v", created, err)
	}
	again, created, err := rt.StartRun(ctx, req)
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("second start: created %v, id %s (first %s), %v", created, again.ID, first.ID, err)
	}
	req.Tenant = "globex"
	other, created, err := rt.StartRun(ctx, req)
	if err != nil || !created || other.ID == first.ID {
		t.Fatalf("other tenant: created %v, id %s, %v", created, other.ID, err)
	}
	if _, err := st.GetRun(ctx, "acme", "run_does_not_exist"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown run: %v, want ErrNotFound", err)
	}
	if _, _, err := rt.StartRun(ctx, RunRequest{Agent: "nobody"}); err == nil || !strings.Contains(err.Error(), `no agent named "nobody"`) {
		t.Errorf("unknown agent: %v", err)
	}
}

func TestBadToolCallsTeachTheModelAndTheRunGoesOn(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	panicky := Tool{Name: "explode", Call: func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		panic("nil map write")
	}}
	agent := &Agent{Name: "a", Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{
			{Name: "lookup", Args: map[string]any{"id": 42}},
			{Name: "lookup", Args: json.RawMessage(`{}`)},
			{Name: "no_such_tool", Args: map[string]any{}},
			{Name: "explode", Args: map[string]any{}},
		}},
		scripted.Reply{Text: "I could not look it up."},
	), Tools: []Tool{lookupTool(), panicky}}
	run := startAndDrain(t, newRuntime(t, st, nil, agent), RunRequest{Agent: "a", User: "u", Input: "go"})
	if run.Status != store.StatusDone {
		t.Fatalf("run ended %s (%s: %s)", run.Status, run.StopReason, run.StopDetail)
	}
	results := loadMessages(t, st, run.ID)[2].Content
	// Four calls in a row that learned nothing: the progress detector asks
	// the model to replan, in the same message.
	if len(results) != 5 || results[4].Type != model.TypeText || !strings.HasPrefix(results[4].Text, "REPLAN:") {
		t.Fatalf("%d blocks for 4 calls, want 4 results and a REPLAN: %+v", len(results), results)
	}
	for i, want := range []string{"invalid arguments for lookup", "invalid arguments for lookup", `no tool named "no_such_tool"`, "tool explode panicked: nil map write"} {
		if !results[i].IsError || !strings.Contains(results[i].Content, want) {
			t.Errorf("result %d: is_error %v, %q; want an error saying %q", i, results[i].IsError, results[i].Content, want)
		}
	}
	if !strings.Contains(results[1].Content, "id") {
		t.Errorf("missing-field error does not name the field: %q", results[1].Content)
	}
}

func TestRunIsNeverResumedIntoAnotherVersion(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	v1 := &Agent{Name: "a", Instructions: "be brief", Model: scripted.New(scripted.Reply{Text: "done"})}
	run, _, err := newRuntime(t, st, nil, v1).StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	v2 := &Agent{Name: "a", Instructions: "be thorough", Model: scripted.New(scripted.Reply{Text: "done"})}
	rt2 := newRuntime(t, st, nil, v2)
	if v1.Version == v2.Version {
		t.Fatal("changed instructions kept the version")
	}
	if err := rt2.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := st.GetRun(ctx, "", run.ID)
	if got.Status != store.StatusPaused || got.StopReason != "version_mismatch" ||
		!strings.Contains(got.StopDetail, v1.Version) || !strings.Contains(got.StopDetail, v2.Version) {
		t.Fatalf("run %s (%s): %s", got.Status, got.StopReason, got.StopDetail)
	}
	if got.ModelCalls != 0 {
		t.Errorf("the model was called %d times", got.ModelCalls)
	}
}

// blockingModel answers after the test lets it, so a test can hold a run in
// the middle of a model call.
type blockingModel struct {
	entered chan struct{}
	release chan struct{}
}

func (m *blockingModel) Name() string { return "blocking" }

func (m *blockingModel) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	m.entered <- struct{}{}
	select {
	case <-m.release:
	case <-ctx.Done():
		return model.Response{}, ctx.Err()
	}
	return model.Response{Content: []model.Block{model.TextBlock("finally")}, StopReason: model.StopEndTurn}, nil
}

// A worker that stalls past its lease is replaced: the next worker claims at
// a higher epoch and finishes the run, and every write of the stale worker is
// refused.
func TestExpiredLeaseIsResumedAndTheStaleWorkerIsFenced(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	c := newClock()
	stalled := &blockingModel{entered: make(chan struct{}), release: make(chan struct{})}
	a1 := &Agent{Name: "a", Version: "v1", Model: stalled}
	rt1 := newRuntime(t, st, c, a1)
	run, _, err := rt1.StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	done1 := make(chan error)
	go func() { done1 <- rt1.Drain(ctx) }()
	<-stalled.entered // worker 1 holds the lease, mid-call

	c.Advance(31 * time.Second) // past the default 30s TTL, with no renewal
	a2 := &Agent{Name: "a", Version: "v1", Model: scripted.New(scripted.Reply{Text: "resumed"})}
	rt2 := newRuntime(t, st, c, a2)
	if err := rt2.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := st.GetRun(ctx, "", run.ID)
	if got.Status != store.StatusDone || got.Final != "resumed" || got.LeaseEpoch != 2 {
		t.Fatalf("after takeover: %s %q epoch %d", got.Status, got.Final, got.LeaseEpoch)
	}
	// The trace says whose lease was taken over.
	var takenFrom []string
	events, _ := st.Events(ctx, run.ID)
	for _, ev := range events {
		if ev.Type == store.EventClaimed {
			d, _ := store.DecodeEvent[store.ClaimedData](ev)
			takenFrom = append(takenFrom, d.TakenFrom)
		}
	}
	if len(takenFrom) != 1 || takenFrom[0] == "" {
		t.Errorf("claims durable in the trace taken from %q; want the takeover's, from the first worker", takenFrom)
	}

	close(stalled.release) // worker 1 wakes up and tries to write
	if err := <-done1; err != nil {
		t.Fatal(err)
	}
	again, _ := st.GetRun(ctx, "", run.ID)
	if again.Final != "resumed" || again.ModelCalls != got.ModelCalls || again.UpdatedAt != got.UpdatedAt {
		t.Errorf("the stale worker wrote: final %q, model calls %d", again.Final, again.ModelCalls)
	}
}

func TestModelFailuresPauseOrFail(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		err        error
		status     store.Status
		reason     string
		resumeWait time.Duration
	}{
		// The provider's Retry-After, then the jittered backoff (its
		// longest here: the test's jitter draws the top of the window).
		{&model.Error{Class: model.ClassRateLimited, StatusCode: 429, RetryAfter: 20 * time.Second, Err: errors.New("slow down")}, store.StatusPaused, "rate_limited", 35 * time.Second},
		{&model.Error{Class: model.ClassOverloaded, StatusCode: 529, Err: errors.New("overloaded")}, store.StatusPaused, "overloaded", 15 * time.Second},
		{&model.Error{Class: model.ClassBadRequest, StatusCode: 400, Err: errors.New("tool_result without tool_use")}, store.StatusFailed, "model_error", 0},
	}
	for _, tc := range cases {
		t.Run(tc.reason, func(t *testing.T) {
			t.Parallel()
			st := openStore(t)
			c := newClock()
			calls := 0
			m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
				calls++
				if calls == 1 {
					return scripted.Reply{Err: tc.err}, nil
				}
				return scripted.Reply{Text: "recovered"}, nil
			})
			rt := newRuntime(t, st, c, &Agent{Name: "a", Model: m})
			rt.cfg.rand = func(n int64) int64 { return n - 1 }
			run := startAndDrain(t, rt, RunRequest{Agent: "a", User: "u", Input: "hi"})
			if run.Status != tc.status || run.StopReason != tc.reason {
				t.Fatalf("run %s (%s), want %s (%s)", run.Status, run.StopReason, tc.status, tc.reason)
			}
			if tc.status != store.StatusPaused {
				if calls != 1 {
					t.Errorf("a bad request was sent %d times", calls)
				}
				return
			}
			if got := run.ResumeAfter.Sub(c.Now()); got != tc.resumeWait {
				t.Errorf("resume after %v, want %v", got, tc.resumeWait)
			}
			c.Advance(tc.resumeWait - time.Second)
			if err := rt.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			if calls != 1 {
				t.Fatalf("resumed %v early", time.Second)
			}
			c.Advance(time.Second)
			if err := rt.Drain(ctx); err != nil {
				t.Fatal(err)
			}
			run, _ = st.GetRun(ctx, "", run.ID)
			if run.Status != store.StatusDone || run.Final != "recovered" {
				t.Errorf("after resume_after: %s %q", run.Status, run.Final)
			}
		})
	}
}

// Ids made in one millisecond, or after the clock stepped back, still sort
// in the order they were made: listings are ordered by id.
func TestRunIDsSortInCreationOrder(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	var ids []string
	for i := range 1000 {
		at := now
		if i == 500 {
			at = now.Add(-time.Second) // the clock stepped back
		}
		ids = append(ids, newRunID(at))
	}
	later := newRunID(now.Add(time.Millisecond))
	if !slices.IsSorted(append(ids, later)) {
		t.Errorf("ids made in order do not sort in order: %v", ids[:4])
	}
	if len(later) != len(ids[0]) || len(ids[0]) != len("run_")+13+12 {
		t.Errorf("id lengths %d and %d, want %d", len(ids[0]), len(later), len("run_")+25)
	}
}
