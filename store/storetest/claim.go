package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

func testClaimQueued(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{})
	now := t0.Add(time.Second)
	runs := claimAll(t, s, "w1", now, 30*time.Second)
	if len(runs) != 1 {
		t.Fatalf("claimed %v, want [%s]", ids(runs), r.ID)
	}
	want := r
	want.Status = store.StatusRunning
	want.LeaseOwner = "w1"
	want.LeaseExpires = now.Add(30 * time.Second)
	want.LeaseEpoch = 1
	want.UpdatedAt = now
	checkRun(t, "claimed run", runs[0], want)
	checkRun(t, "re-read claimed run", getRun(t, s, r.ID), want)
}

func testClaimSkipsLiveLease(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Minute)

	if runs := claimAll(t, s, "w2", t0.Add(59*time.Second), time.Minute); len(runs) != 0 {
		t.Fatalf("claimed %v under a live lease", ids(runs))
	}
	checkRun(t, "run under a live lease", getRun(t, s, r.ID), claimed)

	// A lease is expired from the instant it names.
	now := t0.Add(time.Minute)
	again := claimRun(t, s, r.ID, "w2", now, time.Minute)
	want := claimed
	want.LeaseOwner = "w2"
	want.LeaseExpires = now.Add(time.Minute)
	want.LeaseEpoch = 2
	want.UpdatedAt = now
	checkRun(t, "reclaimed run", again, want)
}

func testClaimPausedWhenDue(t *testing.T, s store.Store) {
	resume := t0.Add(10 * time.Minute)
	due := newRun(t, s, store.CreateRunParams{})
	park(t, s, claimRun(t, s, due.ID, "w1", t0, time.Minute), store.StatusPaused, resume)
	held := newRun(t, s, store.CreateRunParams{})
	park(t, s, claimRun(t, s, held.ID, "w1", t0, time.Minute), store.StatusPaused, time.Time{})

	if runs := claimAll(t, s, "w2", resume.Add(-1), time.Minute); len(runs) != 0 {
		t.Fatalf("claimed %v before resume_after", ids(runs))
	}
	runs := claimAll(t, s, "w2", resume, time.Minute)
	if !slices.Equal(ids(runs), []string{due.ID}) {
		t.Fatalf("claimed %v at resume_after, want [%s]", ids(runs), due.ID)
	}
	if r := runs[0]; r.Status != store.StatusRunning || r.LeaseOwner != "w2" || r.LeaseEpoch != 2 {
		t.Errorf("resumed run: status %s, owner %q, epoch %d; want running, w2, 2", r.Status, r.LeaseOwner, r.LeaseEpoch)
	}
	park(t, s, runs[0], store.StatusDone, time.Time{})
	// A run paused without a time waits for a person.
	if runs := claimAll(t, s, "w2", t0.Add(100*365*24*time.Hour), time.Minute); len(runs) != 0 {
		t.Errorf("claimed %v: a paused run without resume_after", ids(runs))
	}
	if r := getRun(t, s, held.ID); r.Status != store.StatusPaused {
		t.Errorf("paused run: status %s", r.Status)
	}
}

func testClaimNeverWaitingOrTerminal(t *testing.T, s store.Store) {
	statuses := []store.Status{
		store.StatusWaitingApproval, store.StatusDone, store.StatusFailed,
		store.StatusEscalated, store.StatusCanceled,
	}
	for _, status := range statuses {
		r := newRun(t, s, store.CreateRunParams{})
		park(t, s, claimRun(t, s, r.ID, "w1", t0, time.Minute), status, t0)
	}
	// A run finished without letting go of its lease stays finished once the
	// lease expires.
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Minute)
	u := update(claimed)
	u.Status = store.StatusDone
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: t0, Run: u})

	if runs := claimAll(t, s, "w2", t0.Add(100*365*24*time.Hour), time.Minute); len(runs) != 0 {
		t.Fatalf("claimed %v", ids(runs))
	}
}

func testClaimLimitAndOrder(t *testing.T, s store.Store) {
	// Ids sort against age, and the two youngest tie on time, so the claim
	// order can only come from (updated_at, id).
	prefix := uniq("run")
	var want []string
	for i, name := range []string{"e", "d", "c", "a", "b"} {
		at := t0.Add(time.Duration(min(i, 3)) * time.Second)
		want = append(want, newRun(t, s, store.CreateRunParams{ID: prefix + "-" + name, Now: at}).ID)
	}

	var got []string
	for _, limit := range []int{2, 2, 2} {
		runs, err := s.ClaimRuns(t.Context(), store.ClaimRunsParams{Owner: "w1", Now: t0.Add(time.Hour), TTL: time.Hour, Limit: limit})
		if err != nil {
			t.Fatalf("ClaimRuns: %v", err)
		}
		if len(runs) > limit {
			t.Fatalf("ClaimRuns limit %d: %d runs", limit, len(runs))
		}
		batch := ids(runs)
		slices.Sort(batch)
		got = append(got, batch...)
	}
	wantBatches := slices.Concat(sorted(want[0:2]), sorted(want[2:4]), want[4:])
	if !slices.Equal(got, wantBatches) {
		t.Errorf("claimed in batches of 2: %v, want %v", got, wantBatches)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

func testClaimConcurrent(t *testing.T, s store.Store) {
	const runs, workers = 40, 8
	want := make([]string, runs)
	for i := range want {
		want[i] = newRun(t, s, store.CreateRunParams{}).ID
	}
	var (
		mu     sync.Mutex
		got    []string
		wg     sync.WaitGroup
		failed bool
	)
	for w := range workers {
		wg.Go(func() {
			// Bounded, so that a store claiming runs twice fails the
			// test rather than hanging it.
			for range runs {
				claimed, err := s.ClaimRuns(t.Context(), store.ClaimRunsParams{
					Owner: fmt.Sprintf("w%d", w), Now: t0.Add(time.Second), TTL: time.Hour, Limit: 3,
				})
				mu.Lock()
				got = append(got, ids(claimed)...)
				if err != nil {
					failed = true
					t.Errorf("ClaimRuns: %v", err)
				}
				mu.Unlock()
				if err != nil || len(claimed) == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	if failed {
		return
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("claimed %d runs %v, want each of %d exactly once", len(got), got, runs)
	}
}

func testTakeOver(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := newRun(t, s, store.CreateRunParams{})
	old := claimRun(t, s, r.ID, "w1", t0, time.Hour)

	now := t0.Add(time.Minute)
	taken, err := s.TakeOver(ctx, store.TakeOverParams{RunID: r.ID, Epoch: 1, Owner: "w2", Now: now, TTL: 2 * time.Minute})
	if err != nil {
		t.Fatalf("TakeOver at the current epoch: %v", err)
	}
	want := old
	want.LeaseOwner = "w2"
	want.LeaseExpires = now.Add(2 * time.Minute)
	want.LeaseEpoch = 2
	want.UpdatedAt = now
	checkRun(t, "taken over run", taken, want)
	checkRun(t, "re-read taken over run", getRun(t, s, r.ID), want)

	_, err = s.TakeOver(ctx, store.TakeOverParams{RunID: r.ID, Epoch: 1, Owner: "w3", Now: now, TTL: time.Minute})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("TakeOver at a stale epoch: %v, want ErrLeaseLost", err)
	}
	checkRun(t, "run after a stale take over", getRun(t, s, r.ID), want)

	// The old owner is fenced off.
	if err := s.Checkpoint(ctx, store.CheckpointParams{Fence: fence(old), Now: now, Run: update(old)}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Checkpoint by the old owner: %v, want ErrLeaseLost", err)
	}

	queued := newRun(t, s, store.CreateRunParams{Now: t0.Add(time.Hour)})
	_, err = s.TakeOver(ctx, store.TakeOverParams{RunID: queued.ID, Epoch: 0, Owner: "w3", Now: now, TTL: time.Minute})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("TakeOver of a queued run: %v, want ErrLeaseLost", err)
	}
	_, err = s.TakeOver(ctx, store.TakeOverParams{RunID: uniq("run"), Epoch: 1, Owner: "w3", Now: now, TTL: time.Minute})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("TakeOver of an unknown run: %v, want ErrLeaseLost", err)
	}
}

func testRenewLease(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Minute)
	f := fence(claimed)

	expires := t0.Add(5*time.Minute + 7)
	if err := s.RenewLease(ctx, f, expires); err != nil {
		t.Fatalf("RenewLease: %v", err)
	}
	got := getRun(t, s, r.ID)
	if !got.LeaseExpires.Equal(expires) || got.LeaseOwner != "w1" || got.LeaseEpoch != 1 {
		t.Errorf("renewed lease: owner %q, epoch %d, expires %s; want w1, 1, %s", got.LeaseOwner, got.LeaseEpoch, got.LeaseExpires, expires)
	}
	// Renewed, the lease is live past its first expiry.
	if runs := claimAll(t, s, "w2", t0.Add(2*time.Minute), time.Minute); len(runs) != 0 {
		t.Errorf("claimed %v under a renewed lease", ids(runs))
	}

	for _, stale := range []store.Fence{
		{RunID: r.ID, Owner: "w1", Epoch: 0},
		{RunID: r.ID, Owner: "w1", Epoch: 2},
		{RunID: r.ID, Owner: "w2", Epoch: 1},
		{RunID: uniq("run"), Owner: "w1", Epoch: 1},
	} {
		if err := s.RenewLease(ctx, stale, t0.Add(time.Hour)); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("RenewLease %+v: %v, want ErrLeaseLost", stale, err)
		}
	}
	if got := getRun(t, s, r.ID); !got.LeaseExpires.Equal(expires) {
		t.Errorf("lease after stale renewals expires %s, want %s", got.LeaseExpires, expires)
	}

	park(t, s, got, store.StatusRunning, time.Time{})
	if err := s.RenewLease(ctx, f, t0.Add(time.Hour)); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("RenewLease of a released lease: %v, want ErrLeaseLost", err)
	}
}

// testClaimOnlyTheseAgents: a claim naming agents takes only their runs, of
// every kind that is due (queued, on an expired lease, paused until a time
// that has come), and leaves the others' runs as they were.
func testClaimOnlyTheseAgents(t *testing.T, s store.Store) {
	mine, theirs := uniq("agent"), uniq("agent")
	// claimRun takes every run due, so the queued runs come after it.
	expired := newRun(t, s, store.CreateRunParams{Agent: theirs})
	claimRun(t, s, expired.ID, "w1", t0, time.Minute)
	paused := newRun(t, s, store.CreateRunParams{Agent: theirs})
	park(t, s, claimRun(t, s, paused.ID, "w1", t0, time.Minute), store.StatusPaused, t0.Add(time.Minute))
	queued := newRun(t, s, store.CreateRunParams{Agent: mine})
	other := newRun(t, s, store.CreateRunParams{Agent: theirs})
	now := t0.Add(time.Hour)
	claim := func(agents ...string) []string {
		runs, err := s.ClaimRuns(t.Context(), store.ClaimRunsParams{Owner: "w2", Now: now, TTL: time.Minute, Limit: 1000, Agents: agents})
		if err != nil {
			t.Fatalf("ClaimRuns: %v", err)
		}
		got := ids(runs)
		slices.Sort(got)
		return got
	}
	if got := claim(mine, uniq("agent")); !slices.Equal(got, []string{queued.ID}) {
		t.Errorf("claim for %s took %v, want [%s]", mine, got, queued.ID)
	}
	if st := getRun(t, s, other.ID).Status; st != store.StatusQueued {
		t.Errorf("another agent's queued run is %s after the claim, want queued", st)
	}
	want := []string{other.ID, expired.ID, paused.ID}
	slices.Sort(want)
	if got := claim(theirs); !slices.Equal(got, want) {
		t.Errorf("claim for %s took %v, want %v", theirs, got, want)
	}
}

// LeasedRuns lists the runs in flight under a live lease, soonest to
// expire first, and no other: not one whose lease has expired, nor a queued,
// waiting or ended one.
func testLeasedRuns(t *testing.T, s store.Store) {
	late := claimRun(t, s, newRun(t, s, store.CreateRunParams{}).ID, "w1", t0, 2*time.Hour)
	soon := claimRun(t, s, newRun(t, s, store.CreateRunParams{}).ID, "w2", t0, time.Hour)
	expired := claimRun(t, s, newRun(t, s, store.CreateRunParams{}).ID, "w3", t0, time.Minute)
	waiting := claimRun(t, s, newRun(t, s, store.CreateRunParams{}).ID, "w4", t0, time.Hour)
	park(t, s, waiting, store.StatusWaitingApproval, time.Time{})
	queued := newRun(t, s, store.CreateRunParams{})

	mine := map[string]bool{late.ID: true, soon.ID: true, expired.ID: true, queued.ID: true, waiting.ID: true}
	leased := func(limit int) []string {
		t.Helper()
		runs, err := s.LeasedRuns(t.Context(), store.LeasedRunsParams{Now: t0.Add(30 * time.Minute), Limit: limit})
		if err != nil {
			t.Fatalf("LeasedRuns: %v", err)
		}
		var got []string
		for _, r := range runs {
			if mine[r.ID] {
				got = append(got, r.ID)
			}
		}
		return got
	}
	if got, want := leased(100), []string{soon.ID, late.ID}; !slices.Equal(got, want) {
		t.Errorf("LeasedRuns: %v, want %v (soonest to expire first)", got, want)
	}
	if got := leased(1); len(got) > 1 {
		t.Errorf("LeasedRuns with limit 1: %v", got)
	}
	runs, err := s.LeasedRuns(t.Context(), store.LeasedRunsParams{Now: t0.Add(30 * time.Minute), Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.ID == soon.ID {
			checkRun(t, "leased run", r, soon)
		}
	}
}

// testClaimTakenFrom: a claim says whose lease it replaced when that owner
// never let go of it (a takeover), and nothing when the run was queued,
// released, or due by its timer.
func testClaimTakenFrom(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{})
	first := claimRun(t, s, r.ID, "w1", t0, time.Minute)
	if first.TakenFrom != "" {
		t.Errorf("queued run claimed: TakenFrom %q, want none", first.TakenFrom)
	}

	// w1's lease runs out while it holds the run: w2 takes it from w1.
	taken := claimRun(t, s, r.ID, "w2", t0.Add(time.Minute), time.Minute)
	if taken.TakenFrom != "w1" {
		t.Errorf("run claimed on w1's expired lease: TakenFrom %q, want w1", taken.TakenFrom)
	}
	if got := getRun(t, s, r.ID).TakenFrom; got != "" {
		t.Errorf("GetRun: TakenFrom %q; it is the claim's, not stored", got)
	}

	// w2 lets go of the run as it is (a shutdown): w3 takes it from nobody.
	u := update(taken)
	u.LeaseExpires = time.Time{}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(taken), Now: t0.Add(time.Minute), Run: u})
	released := claimRun(t, s, r.ID, "w3", t0.Add(2*time.Minute), time.Minute)
	if released.TakenFrom != "" {
		t.Errorf("released run claimed: TakenFrom %q, want none", released.TakenFrom)
	}

	// Paused until a time, then due: nobody's lease is taken.
	resume := t0.Add(10 * time.Minute)
	park(t, s, released, store.StatusPaused, resume)
	due := claimRun(t, s, r.ID, "w4", resume, time.Minute)
	if due.TakenFrom != "" {
		t.Errorf("paused run claimed when due: TakenFrom %q, want none", due.TakenFrom)
	}
}
