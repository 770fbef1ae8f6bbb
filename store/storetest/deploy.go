package storetest

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

func deployer(t *testing.T, s store.Store) store.Deployer {
	t.Helper()
	d, ok := s.(store.Deployer)
	if !ok {
		t.Fatalf("%T does not move runs between versions (store.Deployer)", s)
	}
	return d
}

// testMoveVersion: a worker moves the run it holds from its version to
// another, with its events; a stale fence or another version moves nothing.
func testMoveVersion(t *testing.T, s store.Store) {
	ctx := t.Context()
	d := deployer(t, s)
	r := newRun(t, s, store.CreateRunParams{AgentVersion: "v1"})
	c := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	ev := []store.Event{{Step: 0, Type: "migrated", Time: t0, Data: json.RawMessage(`{"to":"v2"}`)}}
	stale := fence(c)
	stale.Epoch--
	for name, p := range map[string]store.MoveVersionParams{
		"a stale epoch":     {Fence: stale, Now: t0, From: "v1", To: "v2", Events: ev},
		"another owner":     {Fence: store.Fence{RunID: r.ID, Owner: "w2", Epoch: c.LeaseEpoch}, Now: t0, From: "v1", To: "v2", Events: ev},
		"another version":   {Fence: fence(c), Now: t0, From: "v0", To: "v2", Events: ev},
		"a run not claimed": {Fence: store.Fence{RunID: uniq("run"), Owner: "w1", Epoch: 1}, Now: t0, From: "v1", To: "v2"},
	} {
		if err := d.MoveVersion(ctx, p); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("MoveVersion with %s: %v, want ErrLeaseLost", name, err)
		}
	}
	if got := getRun(t, s, r.ID); got.AgentVersion != "v1" {
		t.Fatalf("refused moves left the run on %s", got.AgentVersion)
	}
	if err := d.MoveVersion(ctx, store.MoveVersionParams{Fence: fence(c), Now: t0.Add(time.Second), From: "v1", To: "v2", Events: ev}); err != nil {
		t.Fatalf("MoveVersion: %v", err)
	}
	got := getRun(t, s, r.ID)
	if got.AgentVersion != "v2" || got.Status != store.StatusRunning || got.LeaseOwner != "w1" || got.LeaseEpoch != c.LeaseEpoch {
		t.Errorf("moved run: version %s, %s, lease %s@%d", got.AgentVersion, got.Status, got.LeaseOwner, got.LeaseEpoch)
	}
	events, err := s.Events(ctx, r.ID)
	if err != nil || len(events) != 1 || events[0].Type != "migrated" || events[0].Seq != 1 {
		t.Errorf("events after the move: %+v, %v", events, err)
	}
	// The worker's checkpoint after the move still holds.
	u := update(c)
	u.Step = 1
	checkpoint(t, s, store.CheckpointParams{Fence: fence(c), Now: t0.Add(2 * time.Second), Run: u,
		Events: []store.Event{{Step: 1, Type: "checkpoint", Time: t0, Data: json.RawMessage(`{}`)}}})
	if events, _ := s.Events(ctx, r.ID); len(events) != 2 || events[1].Seq != 2 {
		t.Errorf("events after the checkpoint: %+v", events)
	}
}

// testRunsByVersion counts the runs not ended per agent and version.
func testRunsByVersion(t *testing.T, s store.Store) {
	ctx := t.Context()
	d := deployer(t, s)
	agent := uniq("agent")
	for _, v := range []string{"v1", "v1", "v2"} {
		newRun(t, s, store.CreateRunParams{Agent: agent, AgentVersion: v})
	}
	ended := newRun(t, s, store.CreateRunParams{Agent: agent, AgentVersion: "v0"})
	for _, c := range claimAll(t, s, "w1", t0, time.Hour) {
		if c.ID == ended.ID {
			park(t, s, c, store.StatusDone, time.Time{})
		}
	}
	counts, err := d.RunsByVersion(ctx)
	if err != nil {
		t.Fatalf("RunsByVersion: %v", err)
	}
	var mine []store.VersionCount
	for _, c := range counts {
		if c.Agent == agent {
			mine = append(mine, c)
		}
	}
	want := []store.VersionCount{{Agent: agent, Version: "v1", Runs: 2}, {Agent: agent, Version: "v2", Runs: 1}}
	if !slices.Equal(mine, want) {
		t.Errorf("RunsByVersion: %+v, want %+v", mine, want)
	}
}
