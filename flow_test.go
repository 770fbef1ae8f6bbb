package belay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// holding is when a run held its concurrency key, read from its trace: from
// the claimed event its worker wrote on taking the run to the stop event
// written with its release.
type holding struct {
	run        string
	start, end time.Time
}

// holdings reads the spans of a run's trace in which a worker held it.
func holdings(t *testing.T, st store.Store, runID string) []holding {
	t.Helper()
	var out []holding
	var open *holding
	for _, e := range eventsOf(t, st, runID) {
		switch e.Type {
		case store.EventClaimed:
			if open != nil {
				t.Fatalf("run %s: claimed at %s while held since %s", runID, e.Time, open.start)
			}
			open = &holding{run: runID, start: e.Time}
		case store.EventStop, store.EventReleased:
			if open == nil {
				t.Fatalf("run %s: %s event without a claim", runID, e.Type)
			}
			open.end = e.Time
			out = append(out, *open)
			open = nil
		}
	}
	if open != nil {
		t.Fatalf("run %s: claimed at %s and never let go", runID, open.start)
	}
	return out
}

// Runs in a few concurrency keys, run by many workers at once: no two runs
// of one key are in a step at the same time, as their traces show. The
// workers would run them together otherwise: there are more workers than
// keys, and every step calls a tool.
func TestConcurrencyKeyRunsNeverOverlapInAStep(t *testing.T) {
	t.Parallel()
	// 300 runs put 60 through each key one after another, enough for any
	// overlap to show; 1,000 took this test past two minutes on two loaded
	// cores.
	n, keys := 300, 5
	if testing.Short() {
		n = 100
	}
	st := openStore(t)
	agent := &Agent{Name: "a", Model: scripted.New(
		scripted.Reply{Text: "PLAN: lookup; answer", Calls: []scripted.Call{{Name: "lookup", Args: map[string]string{"id": "A-1"}}}},
		scripted.Reply{Text: "done"},
	), Tools: []Tool{lookupTool()}, Prices: scripted.Prices, Policy: allowAll, PolicyVersion: "allow-all"}
	rt, err := New(Config{Store: st, Agents: []*Agent{agent}, Workers: 16, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keyOf := map[string]string{}
	for i := range n {
		key := fmt.Sprintf("customer-%d", i%keys)
		run, _, err := rt.StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "go", ConcurrencyKey: key})
		if err != nil {
			t.Fatal(err)
		}
		keyOf[run.ID] = key
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer stopWithin(t, rt, 10*time.Second)
	deadline, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	for id := range keyOf {
		if _, err := waitStatus(deadline, st, id, store.StatusDone); err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
	}

	byKey := map[string][]holding{}
	for id, key := range keyOf {
		byKey[key] = append(byKey[key], holdings(t, st, id)...)
	}
	for key, hs := range byKey {
		slices.SortFunc(hs, func(a, b holding) int { return a.start.Compare(b.start) })
		for i := 1; i < len(hs); i++ {
			if hs[i].start.Before(hs[i-1].end) {
				t.Fatalf("%s: run %s started a step at %s while run %s held the key until %s",
					key, hs[i].run, hs[i].start.Format(time.RFC3339Nano), hs[i-1].run, hs[i-1].end.Format(time.RFC3339Nano))
			}
		}
		if len(hs) < n/keys {
			t.Errorf("%s: %d holdings, want at least %d", key, len(hs), n/keys)
		}
	}
}

// A negative limit is refused with what to use instead; nothing is created.
func TestStartRunRefusesANegativeConcurrencyLimit(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	agent := &Agent{Name: "a", Model: scripted.New(scripted.Reply{Text: "done"}), Prices: scripted.Prices}
	rt := newRuntime(t, st, nil, agent)
	_, _, err := rt.StartRun(context.Background(), RunRequest{Agent: "a", User: "u", Input: "go",
		ConcurrencyKey: "k", ConcurrencyLimit: -2})
	if err == nil {
		t.Fatal("StartRun with concurrency limit -2: no error")
	}
	runs, err := st.ListRuns(context.Background(), store.ListRunsParams{})
	if err != nil || len(runs) != 0 {
		t.Errorf("runs after a refused start: %d (%v), want none", len(runs), err)
	}
}

// A model failure's wait is drawn at random from its whole window, on top
// of the provider's Retry-After: runs a 429 paused together come back
// spread over the window, not together.
func TestModelBackoffIsFullJitterAfterRetryAfter(t *testing.T) {
	t.Parallel()
	for _, draw := range []string{"bottom", "top"} {
		t.Run(draw, func(t *testing.T) {
			t.Parallel()
			st := openStore(t)
			c := newClock()
			m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
				return scripted.Reply{Err: &model.Error{Class: model.ClassRateLimited, StatusCode: 429,
					RetryAfter: 20 * time.Second, Err: errors.New("slow down")}}, nil
			})
			rt := newRuntime(t, st, c, &Agent{Name: "a", Model: m})
			var asked []int64
			rt.cfg.rand = func(n int64) int64 {
				asked = append(asked, n)
				if draw == "top" {
					return n - 1
				}
				return 0
			}
			run := startAndDrain(t, rt, RunRequest{Agent: "a", User: "u", Input: "hi"})
			want := 20 * time.Second
			if draw == "top" {
				want += modelRetryBase
			}
			if got := run.ResumeAfter.Sub(c.Now()); got != want {
				t.Errorf("resume after %v, want %v", got, want)
			}
			if !slices.Contains(asked, int64(modelRetryBase)+1) {
				t.Errorf("jitter drawn from %v, want a draw over the whole first window (%v)", asked, modelRetryBase)
			}
		})
	}
}

// countingModel answers "done" and counts its calls; the first err it is
// given is returned once instead.
type countingModel struct {
	mu    sync.Mutex
	calls int
	fail  error
}

func (m *countingModel) Name() string { return scripted.Name }

func (m *countingModel) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if err := m.fail; err != nil {
		m.fail = nil
		return model.Response{}, err
	}
	return scripted.New(scripted.Reply{Text: "done"}).Generate(ctx, req)
}

// A provider's tokens per minute admit the calls that fit: a run whose
// projected call does not fit pauses until the bucket has room, without
// calling the model, and goes on once it has.
func TestProviderLimitAdmitsByProjectedTokens(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	c := newClock()
	m := &countingModel{}
	// A call projects its input plus 1,000 output tokens: one fits in
	// 1,500 tokens a minute, two do not.
	agent := &Agent{Name: "a", Model: m, MaxOutputTokens: 1000,
		Limits: []ProviderLimit{{Name: "acct", TokensPerMinute: 1500}}}
	rt := newRuntime(t, st, c, agent)
	rt.cfg.rand = func(n int64) int64 { return 0 }
	ctx := context.Background()
	first, _, err := rt.StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "one"})
	if err != nil {
		t.Fatal(err)
	}
	second, _, err := rt.StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "two"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if m.calls != 1 {
		t.Fatalf("%d model calls, want 1: the second does not fit the limit", m.calls)
	}
	var waiting store.Run
	for _, id := range []string{first.ID, second.ID} {
		r, _ := st.GetRun(ctx, "", id)
		if r.Status == store.StatusPaused {
			waiting = r
		}
	}
	if waiting.StopReason != "provider_limit" || !strings.Contains(waiting.StopDetail, "acct:tokens") {
		t.Fatalf("the run the limit held: %s (%s: %s), want paused for provider_limit acct:tokens", waiting.Status,
			waiting.StopReason, waiting.StopDetail)
	}
	if wait := waiting.ResumeAfter.Sub(c.Now()); wait <= 0 || wait > time.Minute {
		t.Errorf("paused for %v, want until the bucket has room, within a minute", wait)
	}
	c.Advance(waiting.ResumeAfter.Sub(c.Now()))
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _ := st.GetRun(ctx, "", waiting.ID); r.Status != store.StatusDone || m.calls != 2 {
		t.Errorf("once the bucket had room: run %s, %d model calls; want done, 2", r.Status, m.calls)
	}
}

// A 429 drains the account's limit for its Retry-After for every worker:
// another run of the account, on another runtime of the same store, waits
// it out without calling the model.
func TestRateLimitedAnswerDrainsTheLimitForEveryWorker(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	c := newClock()
	limited := &countingModel{fail: &model.Error{Class: model.ClassRateLimited, StatusCode: 429,
		RetryAfter: 40 * time.Second, Err: errors.New("rate limited")}}
	other := &countingModel{}
	limit := ProviderLimit{Name: "acct", RequestsPerMinute: 600}
	rt1 := newRuntime(t, st, c, &Agent{Name: "a", Model: limited, Limits: []ProviderLimit{limit}})
	rt2 := newRuntime(t, st, c, &Agent{Name: "b", Model: other, Limits: []ProviderLimit{limit}})
	rt1.cfg.rand = func(n int64) int64 { return 0 }
	rt2.cfg.rand = func(n int64) int64 { return 0 }
	hit := startAndDrain(t, rt1, RunRequest{Agent: "a", User: "u", Input: "one"})
	if hit.Status != store.StatusPaused || hit.StopReason != "rate_limited" {
		t.Fatalf("the run that met the 429: %s (%s)", hit.Status, hit.StopReason)
	}
	c.Advance(10 * time.Second)
	run := startAndDrain(t, rt2, RunRequest{Agent: "b", User: "u", Input: "two"})
	if other.calls != 0 || run.StopReason != "provider_limit" {
		t.Fatalf("a run of the account during the Retry-After: %d model calls, %s (%s); want none, paused for provider_limit",
			other.calls, run.Status, run.StopReason)
	}
	if got := run.ResumeAfter.Sub(c.Now()); got != 30*time.Second {
		t.Errorf("paused for %v, want the 30 s of the Retry-After left", got)
	}
}

// An agent's MaxRunning and StartsPerMinute reach the store when the
// runtime starts, where every worker's claims read them; an agent without
// them leaves what the store holds (belay agent-limit) alone, and negative
// values are refused.
func TestAgentLimitsAreWrittenAtStart(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := t.Context()
	if err := st.SetAgentLimit(ctx, store.AgentLimit{Agent: "b", MaxRunning: 7}); err != nil {
		t.Fatal(err)
	}
	m := scripted.New(scripted.Reply{Text: "done"})
	rt := newRuntime(t, st, newClock(), &Agent{Name: "a", Model: m, MaxRunning: 3, StartsPerMinute: 30}, &Agent{Name: "b", Model: m})
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rt.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	limits, err := st.AgentLimits(ctx)
	want := []store.AgentLimit{{Agent: "a", MaxRunning: 3, StartsPerMinute: 30}, {Agent: "b", MaxRunning: 7}}
	if err != nil || !slices.Equal(limits, want) {
		t.Errorf("agent limits after start: %v (%v), want %v", limits, err, want)
	}
	_, err = New(Config{Store: st, Agents: []*Agent{{Name: "c", Model: m, StartsPerMinute: -1}}})
	if err == nil || !strings.Contains(err.Error(), "StartsPerMinute") {
		t.Errorf("New with a negative start rate: %v, want an error naming StartsPerMinute", err)
	}
}
