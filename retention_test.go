package belay

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// TestRuntimePrunesEndedRuns keeps runs a day after they end: a runtime
// started with the clock 25 hours on deletes the run that ended then, and
// keeps the one that ended 13 hours ago.
func TestRuntimePrunesEndedRuns(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	c := newClock()
	agent := &Agent{Name: "a", Model: scripted.New(scripted.Reply{Text: "one"}, scripted.Reply{Text: "two"}),
		Policy: allowAll, PolicyVersion: "allow-all"}
	rt, err := New(Config{Store: st, Agents: []*Agent{agent}, KeepEnded: 24 * time.Hour, PollInterval: 10 * time.Millisecond, now: c.Now})
	if err != nil {
		t.Fatal(err)
	}
	old := startAndDrain(t, rt, RunRequest{Agent: "a", Input: "first"})
	c.Advance(12 * time.Hour)
	recent := startAndDrain(t, rt, RunRequest{Agent: "a", Input: "second"})
	if old.Status != store.StatusDone || recent.Status != store.StatusDone {
		t.Fatalf("runs ended %s and %s, want done", old.Status, recent.Status)
	}
	c.Advance(13 * time.Hour)

	ctx := context.Background()
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop(ctx)
	testrun.WaitFor(t, "the run that ended 25 hours ago to be deleted", func() bool {
		_, err := st.GetRun(ctx, "", old.ID)
		return errors.Is(err, store.ErrNotFound)
	})
	if _, err := st.GetRun(ctx, "", recent.ID); err != nil {
		t.Errorf("the run that ended 13 hours ago: %v, want it kept", err)
	}
}

// prunes counts the PruneRuns calls of a store that always has n runs to
// delete.
type prunes struct {
	store.Store
	calls []store.PruneRunsParams
	n     int
}

func (p *prunes) PruneRuns(_ context.Context, params store.PruneRunsParams) (int, error) {
	p.calls = append(p.calls, params)
	return min(p.n, params.Limit), nil
}

func TestRetentionPace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	keep := 30 * 24 * time.Hour
	s := &prunes{n: 0}
	var r retention

	for _, step := range []struct {
		at        time.Duration
		n         int
		wantCalls int
	}{
		{0, 0, 1},                          // the first sweep prunes
		{time.Second, 0, 1},                // then once a minute
		{pruneEvery, pruneBatch, 2},        // a minute on: a full batch
		{pruneEvery + time.Second, 0, 3},   // so the next sweep goes on at once
		{pruneEvery + 2*time.Second, 0, 3}, // and then waits again
		{2*pruneEvery + time.Second, 0, 4}, // a minute after the last
	} {
		s.n = step.n
		if err := r.prune(ctx, s, start.Add(step.at), keep); err != nil {
			t.Fatal(err)
		}
		if len(s.calls) != step.wantCalls {
			t.Fatalf("at %v: %d prunes, want %d", step.at, len(s.calls), step.wantCalls)
		}
	}
	if got, want := s.calls[0].Before, start.Add(-keep); !got.Equal(want) || s.calls[0].Limit != pruneBatch {
		t.Errorf("first prune %+v, want runs ended before %v, %d at a time", s.calls[0], want, pruneBatch)
	}
	// Without KeepEnded nothing is ever pruned.
	var off retention
	s.calls = nil
	if err := off.prune(ctx, s, start, 0); err != nil || len(s.calls) != 0 {
		t.Errorf("prune with KeepEnded 0: %d calls, %v", len(s.calls), err)
	}
}

func TestConfigRefusesNegativeDurations(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	agent := &Agent{Name: "a", Model: scripted.New(scripted.Reply{Text: "hi"})}
	for _, cfg := range []Config{
		{KeepEnded: -time.Hour},
		{PollInterval: -time.Second},
		{Workers: -1},
	} {
		cfg.Store, cfg.Agents = st, []*Agent{agent}
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "must not be negative") {
			t.Errorf("New(%+v): %v, want a refusal of the negative value", cfg, err)
		}
	}
}
