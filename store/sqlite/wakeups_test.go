package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// A process watching the file hears of a run another process created on
// it within milliseconds, not at its next poll.
func TestWakeupsAcrossProcesses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "belay.db")
	a, b := openTest(t, path), openTest(t, path)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	wake, err := b.Wakeups(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		start := time.Now()
		if _, _, err := a.CreateRun(ctx, store.CreateRunParams{ID: "run-" + string(rune('a'+i)), Tenant: "t", Agent: "a", Now: start}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-wake:
			t.Logf("woken %v after the other store's commit", time.Since(start).Round(time.Microsecond))
		case <-ctx.Done():
			t.Fatalf("no wakeup for run %d created by the other store", i)
		}
	}
	cancel()
	for range wake {
	}
}

// Each write that makes a run due stamps the wakeup file once it commits;
// a step that keeps its lease does not, so a busy store does not wake idle
// processes at every step.
func TestWakeupsStampWritesThatMakeRunsDue(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "belay.db")
	s := openTest(t, path)
	ctx := t.Context()
	stamp := func() string {
		t.Helper()
		b, err := os.ReadFile(wakeupPath(path))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	before := stamp()
	if _, _, err := s.CreateRun(ctx, store.CreateRunParams{ID: "run-1", Tenant: "t", Agent: "a", Now: now}); err != nil {
		t.Fatal(err)
	}
	created := stamp()
	if created == before {
		t.Fatal("CreateRun did not stamp the wakeup file")
	}
	runs, err := s.ClaimRuns(ctx, store.ClaimRunsParams{Owner: "w", Now: now, TTL: time.Minute, Limit: 1})
	if err != nil || len(runs) != 1 {
		t.Fatalf("claim: %v %v", runs, err)
	}
	r := runs[0]
	f := store.Fence{RunID: r.ID, Owner: r.LeaseOwner, Epoch: r.LeaseEpoch}
	keep := store.RunUpdate{Status: store.StatusRunning, LeaseExpires: now.Add(time.Minute), KeepLease: true}
	if err := s.Checkpoint(ctx, store.CheckpointParams{Fence: f, Now: now, Run: keep}); err != nil {
		t.Fatal(err)
	}
	if stamp() != created {
		t.Error("a claim or a step that keeps its lease stamped the wakeup file")
	}
	// A write fenced off stamps nothing, even in a batch that commits.
	stale := f
	stale.Epoch++
	if err := s.Checkpoint(ctx, store.CheckpointParams{Fence: stale, Now: now, Run: store.RunUpdate{Status: store.StatusRunning}}); err == nil {
		t.Fatal("a stale checkpoint was written")
	}
	if stamp() != created {
		t.Error("a refused release stamped the wakeup file")
	}
	if err := s.Checkpoint(ctx, store.CheckpointParams{Fence: f, Now: now, Run: store.RunUpdate{Status: store.StatusRunning}}); err != nil {
		t.Fatal(err)
	}
	if stamp() == created {
		t.Error("a release of a run still due did not stamp the wakeup file")
	}
}

// A run that leaves its step while another run of its concurrency key
// waits stamps the wakeup file, so that processes watching it claim the
// waiting run at once, not at their next poll. A run whose key nobody
// waits for, or without a key, stamps nothing: every ended run would
// otherwise wake every idle process.
func TestWakeupsStampAConcurrencyKeyLetGo(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "belay.db")
	s := openTest(t, path)
	ctx := t.Context()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, r := range []store.CreateRunParams{
		{ID: "run-1", ConcurrencyKey: "cus_1", ConcurrencyLimit: 1},
		{ID: "run-2", ConcurrencyKey: "cus_1", ConcurrencyLimit: 1},
		{ID: "run-3", ConcurrencyKey: "cus_2", ConcurrencyLimit: 1},
		{ID: "run-4"},
	} {
		r.Tenant, r.Agent, r.Now = "t", "a", now
		if _, _, err := s.CreateRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := s.ClaimRuns(ctx, store.ClaimRunsParams{Owner: "w", Now: now, TTL: time.Minute, Limit: 4})
	if err != nil || len(runs) != 3 {
		t.Fatalf("claim: %v %v; want run-1, run-3 and run-4", runs, err)
	}
	byID := map[string]store.Run{}
	for _, r := range runs {
		byID[r.ID] = r
	}
	stamp := func() string {
		t.Helper()
		b, err := os.ReadFile(wakeupPath(path))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	end := func(id string) {
		t.Helper()
		r := byID[id]
		f := store.Fence{RunID: r.ID, Owner: r.LeaseOwner, Epoch: r.LeaseEpoch}
		if err := s.Checkpoint(ctx, store.CheckpointParams{Fence: f, Now: now, Run: store.RunUpdate{Status: store.StatusDone}}); err != nil {
			t.Fatal(err)
		}
	}
	before := stamp()
	end("run-4")
	end("run-3")
	if stamp() != before {
		t.Error("a run whose key nobody waits for, or without a key, stamped the wakeup file as it ended")
	}
	end("run-1")
	if stamp() == before {
		t.Error("run-1 let go of a key run-2 waits for, and did not stamp the wakeup file")
	}
}
