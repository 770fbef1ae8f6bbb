package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// testPruneRuns deletes the runs that ended before a cut-off, a batch at a
// time, with everything they own, and nothing else.
func testPruneRuns(t *testing.T, s store.Store) {
	ctx := t.Context()
	cut := t0.Add(time.Hour)

	// ended runs a run that ends at at, with a message, an event, a settled
	// ledger entry and a notification.
	ended := func(status store.Status, at time.Time) store.Run {
		t.Helper()
		r := newRun(t, s, store.CreateRunParams{})
		claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
		e, _ := beginEffect(t, s, store.BeginEffectParams{Fence: fence(claimed), Now: t0, Effect: intent(r, uniq("key"), "h")})
		u := update(claimed)
		u.Status, u.LeaseExpires, u.Messages = status, time.Time{}, 1
		checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: at, Run: u,
			Messages: []store.Message{{Seq: 0, Step: 1, Role: "user", Content: []byte(`"hi"`), CreatedAt: at}},
			Events:   []store.Event{{Step: 1, Type: "stop", Time: at, Data: json.RawMessage(`{}`)}},
			Effects:  []store.EffectUpdate{{Tenant: e.Tenant, Key: e.Key, State: store.EffectDone, Result: json.RawMessage(`{"ok":true}`)}},
			Outbox:   []store.OutboxMessage{{Kind: "run_finished", Payload: json.RawMessage(`{}`)}}})
		return r
	}
	oldest := ended(store.StatusDone, t0.Add(time.Minute))
	older := ended(store.StatusEscalated, t0.Add(2*time.Minute))
	// An ended run whose approvals were decided: they go with it.
	decided, asked := waitingRun(t, s)
	for _, a := range asked {
		if _, err := s.DecideApproval(ctx, store.DecideParams{Tenant: decided.Tenant, ID: a.ID, Binding: a.Binding,
			Status: store.ApprovalRejected, By: "human:x", Now: t0}); err != nil {
			t.Fatal(err)
		}
	}
	park(t, s, claimRun(t, s, decided.ID, "w1", t0, time.Hour), store.StatusCanceled, time.Time{})
	recent := ended(store.StatusFailed, cut.Add(time.Minute))
	// Runs that have not ended are kept however old: a person may still
	// approve this one, and the other is running.
	waiting, pending := waitingRun(t, s)
	running := newRun(t, s, store.CreateRunParams{})
	claimRun(t, s, running.ID, "w2", t0, time.Hour)

	// A batch at a time: three runs ended before the cut-off.
	for _, want := range []int{2, 1, 0} {
		if n, err := s.PruneRuns(ctx, store.PruneRunsParams{Before: cut, Limit: 2}); err != nil || n != want {
			t.Fatalf("PruneRuns: %d, %v; want %d", n, err, want)
		}
	}
	if got := approvals(t, s, store.ListApprovalsParams{RunID: decided.ID}); len(got) != 0 {
		t.Errorf("the pruned run keeps %d approvals", len(got))
	}
	for _, r := range []store.Run{oldest, older, decided} {
		if _, err := s.GetRun(ctx, "", r.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("pruned run %s: GetRun %v, want ErrNotFound", r.ID, err)
		}
		if ms := messages(t, s, r.ID); len(ms) != 0 {
			t.Errorf("pruned run %s keeps %d messages", r.ID, len(ms))
		}
		if es := events(t, s, r.ID); len(es) != 0 {
			t.Errorf("pruned run %s keeps %d events", r.ID, len(es))
		}
		if es, err := s.Effects(ctx, r.Tenant, r.ID); err != nil || len(es) != 0 {
			t.Errorf("pruned run %s keeps ledger entries %v, %v", r.ID, es, err)
		}
		if out, err := s.Outbox(ctx, r.ID); err != nil || len(out) != 0 {
			t.Errorf("pruned run %s keeps notifications %v, %v", r.ID, out, err)
		}
	}
	for _, r := range []store.Run{recent, waiting, running} {
		if _, err := s.GetRun(ctx, "", r.ID); err != nil {
			t.Errorf("kept run %s: %v", r.ID, err)
		}
	}
	if ms := messages(t, s, recent.ID); len(ms) != 1 {
		t.Errorf("the recent run has %d messages, want 1", len(ms))
	}
	if es, err := s.Effects(ctx, recent.Tenant, recent.ID); err != nil || len(es) != 1 {
		t.Errorf("the recent run's ledger: %v, %v", es, err)
	}
	if got := approvals(t, s, store.ListApprovalsParams{RunID: waiting.ID}); len(got) != len(pending) {
		t.Errorf("the waiting run has %d approvals, want %d", len(got), len(pending))
	}

	// A later cut-off takes the recent run too.
	if n, err := s.PruneRuns(ctx, store.PruneRunsParams{Before: cut.Add(time.Hour), Limit: 10}); err != nil || n != 1 {
		t.Errorf("PruneRuns with a later cut-off: %d, %v; want 1", n, err)
	}
}
