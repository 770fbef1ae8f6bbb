package belay

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// A deploy changed the prompt: a run started on the old version pauses on
// the new workers until an operator migrates it, and then finishes there.
func TestMigrateRunMovesAVersionMismatchToTheRuntimesVersion(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	c := newClock()
	oldAgent := &Agent{Name: "a", Instructions: "be brief", Model: scripted.New()}
	run, _, err := newRuntime(t, st, c, oldAgent).StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	newAgent := &Agent{Name: "a", Instructions: "be thorough", Model: scripted.New(scripted.Reply{Text: "done on the new prompt"})}
	rt := newRuntime(t, st, c, newAgent)
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got := getRun(t, st, run.ID); got.Status != store.StatusPaused || got.StopReason != "version_mismatch" {
		t.Fatalf("run %s (%s) on a worker of another version, want paused on version_mismatch", got.Status, got.StopReason)
	}

	c.Advance(time.Minute)
	migrated, err := rt.MigrateRun(ctx, "", run.ID, "human:ops")
	if err != nil {
		t.Fatal(err)
	}
	if migrated.Status != store.StatusQueued || migrated.AgentVersion != newAgent.Version || migrated.StopReason != "" {
		t.Fatalf("migrated run %s (%q) on version %s, want queued on %s", migrated.Status, migrated.StopReason, migrated.AgentVersion, newAgent.Version)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	done := getRun(t, st, run.ID)
	if done.Status != store.StatusDone || done.Final != "done on the new prompt" || done.AgentVersion != newAgent.Version {
		t.Fatalf("after the migration the run is %s (%s: %s) with %q on version %s", done.Status, done.StopReason, done.StopDetail, done.Final, done.AgentVersion)
	}

	got := strings.Join(eventTypes(t, st, run.ID), " ")
	if want := "run_created stop migrated claimed model_call stop"; got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
	ev := findEvent(t, st, run.ID, "migrated")
	var data map[string]any
	if err := json.Unmarshal(ev.Data, &data); err != nil {
		t.Fatal(err)
	}
	if data["from"] != oldAgent.Version || data["to"] != newAgent.Version || data["by"] != "human:ops" || data["agent"] != "a" ||
		!ev.Time.Equal(c.Now()) {
		t.Errorf("migrated event at %s: %s", ev.Time, ev.Data)
	}

	// Done now: there is nothing to migrate, and nothing changes.
	refuseMigration(t, st, run.ID, store.ErrWrongStatus, func() error {
		_, err := rt.MigrateRun(ctx, "", run.ID, "human:ops")
		return err
	})
}

// Only a run paused on a version mismatch is migrated; a run that paused for
// anything else is left to the command that answers its stop.
func TestMigrateRunRefusesARunPausedForAnotherReason(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	c := newClock()
	agent := &Agent{Name: "a", Version: "v1", Budget: Budget{MaxTurns: 1}, Tools: []Tool{lookupTool()}, Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: "lookup", Args: map[string]string{"id": "A-1"}}}},
	)}
	rt := newRuntime(t, st, c, agent)
	run, _, err := rt.StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got := getRun(t, st, run.ID); got.Status != store.StatusPaused || got.StopReason != "max_turns" {
		t.Fatalf("run %s (%s), want paused on max_turns", got.Status, got.StopReason)
	}
	refuseMigration(t, st, run.ID, store.ErrWrongStatus, func() error {
		_, err := rt.MigrateRun(ctx, "", run.ID, "human:ops")
		return err
	})
	refuseMigration(t, st, run.ID, store.ErrWrongStatus, func() error {
		_, err := MigrateRun(ctx, st, "", run.ID, "v2", "human:ops")
		return err
	})
}

// The version a runtime migrates to is always one of its own agents': a
// runtime without the run's agent has no version to offer and refuses, and
// a runtime still on the run's version resumes it rather than migrating.
func TestMigrateRunNeedsTheRuntimesOwnVersion(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	c := newClock()
	v1 := &Agent{Name: "a", Version: "v1", Model: scripted.New()}
	rt1 := newRuntime(t, st, c, v1)
	run, _, err := rt1.StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if err := newRuntime(t, st, c, &Agent{Name: "a", Version: "v2", Model: scripted.New()}).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if got := getRun(t, st, run.ID); got.StopReason != "version_mismatch" {
		t.Fatalf("run %s (%s), want paused on version_mismatch", got.Status, got.StopReason)
	}

	other := newRuntime(t, st, c, &Agent{Name: "other", Version: "v2", Model: scripted.New()})
	refuseMigration(t, st, run.ID, ErrUnknownAgent, func() error {
		_, err := other.MigrateRun(ctx, "", run.ID, "human:ops")
		return err
	})
	refuseMigration(t, st, run.ID, nil, func() error {
		_, err := rt1.MigrateRun(ctx, "", run.ID, "human:ops")
		if err == nil || !strings.Contains(err.Error(), "on version v1 already") {
			t.Errorf("migrating a run to the version it has: %v", err)
		}
		return err
	})
	refuseMigration(t, st, run.ID, nil, func() error {
		_, err := MigrateRun(ctx, st, "", run.ID, "", "human:ops")
		return err
	})
	if _, err := other.MigrateRun(ctx, "", "run_does_not_exist", "human:ops"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("migrating an unknown run: %v, want ErrNotFound", err)
	}
}

// refuseMigration calls migrate, which must fail (with want, if not nil)
// and leave the run and its trace as they were.
func refuseMigration(t *testing.T, st store.Store, runID string, want error, migrate func() error) {
	t.Helper()
	before, events := getRun(t, st, runID), eventTypes(t, st, runID)
	err := migrate()
	if err == nil || (want != nil && !errors.Is(err, want)) {
		t.Errorf("migration: %v, want %v", err, want)
	}
	after := getRun(t, st, runID)
	if after.Status != before.Status || after.StopReason != before.StopReason || after.AgentVersion != before.AgentVersion ||
		!after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("a refused migration changed the run: %s (%s) on %s, was %s (%s) on %s",
			after.Status, after.StopReason, after.AgentVersion, before.Status, before.StopReason, before.AgentVersion)
	}
	if got := eventTypes(t, st, runID); !slices.Equal(got, events) {
		t.Errorf("a refused migration changed the trace: %v, was %v", got, events)
	}
}

func getRun(t *testing.T, st store.Store, id string) store.Run {
	t.Helper()
	run, err := st.GetRun(context.Background(), "", id)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func findEvent(t *testing.T, st store.Store, runID, typ string) store.Event {
	t.Helper()
	events, err := st.Events(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if e.Type == typ {
			return e
		}
	}
	t.Fatalf("run %s has no %s event", runID, typ)
	return store.Event{}
}
