package postgres

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// parkOnApprovals gives n runs of tenant t each k pending approvals, the
// runs waiting_approval.
func parkOnApprovals(t *testing.T, s *Store, n, k int, expires time.Time) []store.Run {
	t.Helper()
	ctx := t.Context()
	var runs []store.Run
	for i := range n {
		id := fmt.Sprintf("run-%02d", i)
		if _, _, err := s.CreateRun(ctx, store.CreateRunParams{ID: id, Tenant: "t", Agent: "a", Now: t0}); err != nil {
			t.Fatal(err)
		}
		claimed, err := s.ClaimRuns(ctx, store.ClaimRunsParams{Owner: "w", Now: t0, TTL: time.Hour, Limit: 1})
		if err != nil || len(claimed) != 1 {
			t.Fatalf("ClaimRuns: %v, %v", ids(claimed), err)
		}
		r := claimed[0]
		var as []store.Approval
		for j := range k {
			as = append(as, store.Approval{ID: fmt.Sprintf("%s-ap-%d", id, j), Tool: "refund", Args: json.RawMessage(`{}`),
				ArgsHash: fmt.Sprintf("h%d", j), Binding: fmt.Sprintf("b%d", j), ExpiresAt: expires})
		}
		if err := s.Checkpoint(ctx, store.CheckpointParams{Fence: store.Fence{RunID: r.ID, Owner: "w", Epoch: r.LeaseEpoch}, Now: t0,
			Run: store.RunUpdate{Status: store.StatusWaitingApproval}, Approvals: as}); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	return runs
}

// Two people decide the last two approvals of a run at the same moment:
// whichever commits second sees nothing pending and queues the run.
func TestDecideLastApprovalsAtOnce(t *testing.T) {
	t.Parallel()
	s := openTest(t, Config{MaxConns: 4})
	const runs = 20
	parked := parkOnApprovals(t, s, runs, 2, t0.Add(time.Hour))
	var wg sync.WaitGroup
	for _, r := range parked {
		for j := range 2 {
			wg.Go(func() {
				_, err := s.DecideApproval(t.Context(), store.DecideParams{Tenant: "t", ID: fmt.Sprintf("%s-ap-%d", r.ID, j),
					Binding: fmt.Sprintf("b%d", j), Status: store.ApprovalApproved, By: "human:x", Now: t0})
				if err != nil {
					t.Errorf("DecideApproval: %v", err)
				}
			})
		}
	}
	wg.Wait()
	for _, r := range parked {
		got, err := s.GetRun(t.Context(), "t", r.ID)
		if err != nil || got.Status != store.StatusQueued {
			t.Errorf("run %s: %s, %v; want queued once both approvals are decided", r.ID, got.Status, err)
		}
	}
}

// Expirers running at once expire every due approval exactly once.
func TestExpireApprovalsAtOnce(t *testing.T) {
	t.Parallel()
	s := openTest(t, Config{MaxConns: 4})
	const runs, each = 30, 3
	parkOnApprovals(t, s, runs, each, t0.Add(time.Minute))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
	)
	for range 4 {
		wg.Go(func() {
			for {
				n, err := s.ExpireApprovals(t.Context(), t0.Add(time.Hour))
				if err != nil {
					t.Errorf("ExpireApprovals: %v", err)
					return
				}
				mu.Lock()
				total += n
				mu.Unlock()
				if n == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	// An expirer that found only locked runs stopped early: finish.
	for {
		n, err := s.ExpireApprovals(t.Context(), t0.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		total += n
	}
	if total != runs*each {
		t.Errorf("expired %d approvals, want %d", total, runs*each)
	}
	queued, err := s.ListRuns(t.Context(), store.ListRunsParams{Tenant: "t", Status: store.StatusQueued})
	if err != nil || len(queued) != runs {
		t.Errorf("%d runs queued after expiry, %v; want %d", len(queued), err, runs)
	}
	for _, r := range queued {
		evs, err := s.Events(t.Context(), r.ID)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range evs {
			if e.Type == "approval_expired" {
				n++
			}
		}
		if n != each {
			t.Errorf("run %s has %d approval_expired events, want %d", r.ID, n, each)
		}
	}
}
