package belay

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	n, keys := 1000, 5
	if testing.Short() {
		n = 200
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
	deadline, cancel := context.WithTimeout(ctx, 2*time.Minute)
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
