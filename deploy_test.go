package belay

import (
	"context"
	"testing"
	"time"

	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// A replay passes when it makes every side effect its recording made with
// the same arguments; of an ended recording, exactly those, verified.
func TestReplayPasses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		r     ReplayResult
		ended bool
		want  bool
	}{
		{"the same, verified", ReplayResult{Same: 3, Verified: true}, true, true},
		{"the same, not verified", ReplayResult{Same: 3}, true, false},
		{"one missing", ReplayResult{Same: 2, Missing: 1, Verified: true}, true, false},
		{"other arguments", ReplayResult{Same: 2, DifferentArgs: 1, Verified: true}, false, false},
		{"an extra one after an ended recording", ReplayResult{Same: 3, Extra: 1, Verified: true}, true, false},
		{"the rest of a paused run's work", ReplayResult{Same: 1, Extra: 2}, false, true},
	} {
		if got := ReplayPasses(c.r, c.ended); got != c.want {
			t.Errorf("%s: ReplayPasses = %v, want %v", c.name, got, c.want)
		}
	}
}

// MigrateAll asks its check about each run and leaves the runs it refuses
// paused, naming them.
func TestMigrateAllLeavesWhatItsCheckRefuses(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	old := &Agent{Name: "a", Instructions: "be brief", Model: scripted.New()}
	rtOld := newRuntime(t, st, nil, old)
	var ids []string
	for range 3 {
		run, _, err := rtOld.StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "hi"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, run.ID)
	}
	next := &Agent{Name: "a", Instructions: "be thorough", Model: scripted.New()}
	rt := newRuntime(t, st, nil, next)
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := rt.Operator().MigrateAll(ctx, MigrateAllOptions{From: old.Version, To: next.Version, By: "human:ops",
		Check: func(_ context.Context, run store.Run) (bool, error) { return run.ID != ids[1], nil }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Moved) != 2 || len(res.Refused) != 1 || res.Refused[0] != ids[1] {
		t.Fatalf("moved %v, refused %v; want all but %s moved", res.Moved, res.Refused, ids[1])
	}
	if got := getRun(t, st, ids[1]); got.Status != store.StatusPaused || got.AgentVersion != old.Version {
		t.Errorf("the refused run is %s on %s, want paused on the old version", got.Status, got.AgentVersion)
	}
	if got := getRun(t, st, ids[0]); got.Status != store.StatusQueued || got.AgentVersion != next.Version {
		t.Errorf("a moved run is %s on %s, want queued on the new version", got.Status, got.AgentVersion)
	}
}

// A run a worker of the old version held when it died is taken, once its
// lease runs out, by a worker of a version that continues the old one, and
// finishes there without a pause, its move in the trace.
func TestContinuesTakesARunItsOldWorkerLeft(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	c := newClock()
	old := &Agent{Name: "a", Instructions: "be brief", Model: scripted.New()}
	run, _, err := newRuntime(t, st, c, old).StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if claimed, err := st.ClaimRuns(ctx, store.ClaimRunsParams{Owner: "gone-worker", Now: c.Now(), TTL: time.Second, Limit: 1}); err != nil || len(claimed) != 1 {
		t.Fatalf("claim as the old worker: %v, %v", claimed, err)
	}
	c.Advance(time.Minute)
	next := &Agent{Name: "a", Instructions: "be thorough", Continues: []string{old.Version},
		Model: scripted.New(scripted.Reply{Text: "done on the new version"})}
	if err := newRuntime(t, st, c, next).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	done := getRun(t, st, run.ID)
	if done.Status != store.StatusDone || done.AgentVersion != next.Version || done.Final != "done on the new version" {
		t.Fatalf("the run is %s (%s) on %s with %q", done.Status, done.StopReason, done.AgentVersion, done.Final)
	}
	ev := findEvent(t, st, run.ID, store.EventMigrated)
	d, err := store.DecodeEvent[store.MigratedData](ev)
	if err != nil || d.By != ContinuesDecider || d.From != old.Version || d.To != next.Version {
		t.Errorf("migrated event %+v, %v", d, err)
	}
}
