package storetest

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// The cases of waits: a run that asked its user a question waits, holding
// no lease, until the answer comes; the answer is applied once.

// askingRun returns a run parked in waiting_input on one pending wait for
// its user's answer, expiring an hour after t0.
func askingRun(t *testing.T, s store.Store) (store.Run, store.Wait) {
	t.Helper()
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	u := update(claimed)
	u.Status, u.LeaseExpires = store.StatusWaitingInput, time.Time{}
	w := store.Wait{ID: uniq("wt"), Step: 2, ToolUseID: "toolu_ask", Kind: store.WaitInput, Name: "ask_user",
		Prompt: json.RawMessage(`{"question":"Refund to your card or as store credit?"}`), Binding: "b-ask",
		ExpiresAt: t0.Add(time.Hour)}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: t0, Run: u, Waits: []store.Wait{w}})
	return getRun(t, s, r.ID), w
}

func waiter(t *testing.T, s store.Store) store.Waiter {
	t.Helper()
	w, ok := s.(store.Waiter)
	if !ok {
		t.Fatalf("%T keeps no waits", s)
	}
	return w
}

func waitsOf(t *testing.T, s store.Store, p store.ListWaitsParams) []store.Wait {
	t.Helper()
	ws, err := waiter(t, s).Waits(t.Context(), p)
	if err != nil {
		t.Fatalf("Waits: %v", err)
	}
	return ws
}

func reply(r store.Run, key, text string, now time.Time) store.AnswerWaitParams {
	answer, _ := json.Marshal(map[string]string{"text": text})
	return store.AnswerWaitParams{Tenant: r.Tenant, RunID: r.ID, Kind: store.WaitInput, Key: key, Answer: answer,
		By: "user:ada", Now: now, Events: []store.Event{{Type: store.EventWaitAnswered, Time: now, Data: json.RawMessage(`{}`)}}}
}

func testWaitPersistsAndReplays(t *testing.T, s store.Store) {
	r, want := askingRun(t, s)
	if r.Status != store.StatusWaitingInput || r.LeaseOwner != "" {
		t.Fatalf("run is %s owned by %q, want waiting_input with no lease", r.Status, r.LeaseOwner)
	}
	if runs := claimAll(t, s, "w2", t0.Add(2*time.Hour), time.Hour); len(runs) != 0 {
		t.Fatalf("claimed a run waiting for input: %v", ids(runs))
	}
	got := waitsOf(t, s, store.ListWaitsParams{RunID: r.ID})
	if len(got) != 1 {
		t.Fatalf("%d waits, want 1", len(got))
	}
	w := got[0]
	if w.ID != want.ID || w.Tenant != r.Tenant || w.RunID != r.ID || w.Step != 2 || w.ToolUseID != "toolu_ask" ||
		w.Kind != store.WaitInput || w.Name != "ask_user" || string(w.Prompt) != string(want.Prompt) || w.Binding != "b-ask" ||
		w.Status != store.WaitPending || !w.ExpiresAt.Equal(want.ExpiresAt) || !w.CreatedAt.Equal(t0) ||
		len(w.Answer) != 0 || w.AnsweredBy != "" || !w.AnsweredAt.IsZero() {
		t.Errorf("wait read back as %+v", w)
	}

	// The step that asked runs again (its write was in doubt): the same
	// call asks under another id, and the first wait stands.
	resumed, err := s.ResumeRun(t.Context(), store.ResumeRunParams{Tenant: r.Tenant, RunID: r.ID, Now: t0, From: []store.Status{store.StatusWaitingInput}})
	if err != nil {
		t.Fatal(err)
	}
	c := claimRun(t, s, resumed.ID, "w2", t0.Add(time.Minute), time.Hour)
	again := want
	again.ID = uniq("wt")
	u := update(c)
	u.Status, u.LeaseExpires = store.StatusWaitingInput, time.Time{}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(c), Now: t0.Add(time.Minute), Run: u, Waits: []store.Wait{again}})
	if got := waitsOf(t, s, store.ListWaitsParams{RunID: r.ID}); len(got) != 1 || got[0].ID != want.ID {
		t.Errorf("after the step ran again: %d waits; want the first kept alone", len(got))
	}

	if n := len(waitsOf(t, s, store.ListWaitsParams{Tenant: uniq("tenant")})); n != 0 {
		t.Errorf("another tenant lists %d waits", n)
	}
	if n := len(waitsOf(t, s, store.ListWaitsParams{Tenant: r.Tenant, Status: store.WaitPending})); n != 1 {
		t.Errorf("%d pending waits in the tenant, want 1", n)
	}
}

func testAnswerWaitOnce(t *testing.T, s store.Store) {
	r, w := askingRun(t, s)
	ctx := t.Context()
	ws := waiter(t, s)
	now := t0.Add(10 * time.Minute)

	if _, _, err := ws.AnswerWait(ctx, reply(store.Run{Tenant: uniq("tenant"), ID: r.ID}, "k1", "card", now)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("answer from another tenant: %v, want ErrNotFound", err)
	}
	forged := reply(r, "k0", "card", now)
	forged.Binding = "forged"
	if _, _, err := ws.AnswerWait(ctx, forged); !errors.Is(err, store.ErrBindingMismatch) {
		t.Errorf("answer with another binding: %v, want ErrBindingMismatch", err)
	}
	if got := getRun(t, s, r.ID); got.Status != store.StatusWaitingInput {
		t.Fatalf("a refused answer left the run %s", got.Status)
	}

	// Two answers at once under two keys: exactly one is applied.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	got := make([]store.Wait, 2)
	for i, text := range []string{"card", "store credit"} {
		wg.Go(func() { got[i], _, errs[i] = ws.AnswerWait(ctx, reply(r, "k"+text, text, now)) })
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil:
			won = i
		case !errors.Is(err, store.ErrNotWaiting):
			t.Errorf("answer %d: %v, want nil or ErrNotWaiting", i, err)
		}
	}
	if won < 0 || errs[1-won] == nil {
		t.Fatalf("answers at once: %v; want exactly one applied", errs)
	}
	a := got[won]
	if a.ID != w.ID || a.Status != store.WaitAnswered || a.AnsweredBy != "user:ada" || !a.AnsweredAt.Equal(now) ||
		a.AnswerKey != "k"+[]string{"card", "store credit"}[won] {
		t.Errorf("answered wait %+v", a)
	}
	run := getRun(t, s, r.ID)
	if run.Status != store.StatusQueued {
		t.Errorf("run is %s once answered, want queued", run.Status)
	}
	if n := countType(events(t, s, r.ID), store.EventWaitAnswered); n != 1 {
		t.Errorf("%d wait_answered events, want 1", n)
	}

	// The winner's answer again under its key is a repeat: the same wait,
	// nothing written. The same key with another answer is refused.
	key := a.AnswerKey
	text := []string{"card", "store credit"}[won]
	again, repeated, err := ws.AnswerWait(ctx, reply(r, key, text, now.Add(time.Minute)))
	if err != nil || !repeated || again.ID != w.ID || !again.AnsweredAt.Equal(now) {
		t.Errorf("repeated answer: %+v repeated=%v err=%v; want the first answer, repeated", again, repeated, err)
	}
	if _, _, err := ws.AnswerWait(ctx, reply(r, key, "something else", now)); !errors.Is(err, store.ErrAnswerKeyReused) {
		t.Errorf("key reused with another answer: %v, want ErrAnswerKeyReused", err)
	}
	if n := countType(events(t, s, r.ID), store.EventWaitAnswered); n != 1 {
		t.Errorf("%d wait_answered events after the repeat, want 1", n)
	}
	// A new answer without a wait pending is refused, and says so.
	if _, _, err := ws.AnswerWait(ctx, reply(r, "k-late", "card", now)); !errors.Is(err, store.ErrNotWaiting) {
		t.Errorf("answer to a run not waiting: %v, want ErrNotWaiting", err)
	}
	if _, _, err := ws.AnswerWait(ctx, reply(r, "", "card", now)); !errors.Is(err, store.ErrNotWaiting) {
		t.Errorf("answer without a key to a run not waiting: %v, want ErrNotWaiting", err)
	}
}

func testAnswerWaitNotWaiting(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{})
	_, _, err := waiter(t, s).AnswerWait(t.Context(), reply(r, "k1", "hello", t0))
	if !errors.Is(err, store.ErrNotWaiting) {
		t.Fatalf("answer to a queued run that asked nothing: %v, want ErrNotWaiting", err)
	}
	if got := getRun(t, s, r.ID); got.Status != store.StatusQueued {
		t.Errorf("run is %s", got.Status)
	}

	// A run canceled while it waited takes no answer, though its wait was
	// left pending.
	asking, _ := askingRun(t, s)
	if _, err := s.(store.Canceler).CancelRun(t.Context(), store.CancelRunParams{Tenant: asking.Tenant, RunID: asking.ID,
		By: "human:ops", Now: t0}); err != nil {
		t.Fatal(err)
	}
	_, _, err = waiter(t, s).AnswerWait(t.Context(), reply(asking, "k1", "card", t0))
	if !errors.Is(err, store.ErrNotWaiting) || !strings.Contains(err.Error(), "canceled") {
		t.Errorf("answer to a canceled run: %v, want ErrNotWaiting saying it is canceled", err)
	}
}

func testWaitExpiry(t *testing.T, s store.Store) {
	r, w := askingRun(t, s)
	ctx := t.Context()
	ws := waiter(t, s)
	late := w.ExpiresAt

	// Past its expiry and before any sweep: the answer is refused.
	if _, _, err := ws.AnswerWait(ctx, reply(r, "k1", "card", late)); !errors.Is(err, store.ErrWaitExpired) {
		t.Errorf("answer at the expiry: %v, want ErrWaitExpired", err)
	}
	if got := getRun(t, s, r.ID); got.Status != store.StatusWaitingInput {
		t.Errorf("a late answer left the run %s", got.Status)
	}

	if expired, err := ws.ExpireDueWaits(ctx, store.ExpireWaitsParams{Now: late.Add(-time.Nanosecond)}); err != nil || len(expired) != 0 {
		t.Fatalf("expiry before the time: %d expired, %v", len(expired), err)
	}
	expired, err := ws.ExpireDueWaits(ctx, store.ExpireWaitsParams{Now: late})
	if err != nil {
		t.Fatal(err)
	}
	if len(expired) != 1 || expired[0].Wait.ID != w.ID || expired[0].Wait.Status != store.WaitExpired ||
		expired[0].Wait.AnsweredBy != store.WaitExpirer || len(expired[0].Events) != 1 || expired[0].Events[0].Type != store.EventWaitExpired {
		t.Fatalf("expired %+v", expired)
	}
	if got := getRun(t, s, r.ID); got.Status != store.StatusQueued {
		t.Errorf("run is %s once its wait expired, want queued for the engine to apply it", got.Status)
	}
	if n := countType(events(t, s, r.ID), store.EventWaitExpired); n != 1 {
		t.Errorf("%d wait_expired events, want 1", n)
	}
	if again, err := ws.ExpireDueWaits(ctx, store.ExpireWaitsParams{Now: late.Add(time.Hour)}); err != nil || len(again) != 0 {
		t.Errorf("a second sweep expired %d, %v", len(again), err)
	}
	// After the sweep too, the late answer is refused as expired.
	if _, _, err := ws.AnswerWait(ctx, reply(r, "k2", "card", late.Add(time.Hour))); !errors.Is(err, store.ErrWaitExpired) {
		t.Errorf("answer after the sweep: %v, want ErrWaitExpired", err)
	}
}

func testPruneRemovesWaits(t *testing.T, s store.Store) {
	r, _ := askingRun(t, s)
	if _, _, err := waiter(t, s).AnswerWait(t.Context(), reply(r, "k1", "card", t0)); err != nil {
		t.Fatal(err)
	}
	// A signal kept by the run goes with it.
	if _, _, err := waiter(t, s).Signal(t.Context(), signal(r, "never_awaited", "", `{}`, t0)); err != nil {
		t.Fatal(err)
	}
	c := claimRun(t, s, r.ID, "w2", t0, time.Hour)
	u := update(c)
	u.Status, u.LeaseExpires = store.StatusDone, time.Time{}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(c), Now: t0, Run: u})
	n, err := s.PruneRuns(t.Context(), store.PruneRunsParams{Before: time.Now().Add(time.Hour), Limit: 1000})
	if err != nil || n < 1 {
		t.Fatalf("prune: %d, %v", n, err)
	}
	if got := waitsOf(t, s, store.ListWaitsParams{RunID: r.ID}); len(got) != 0 {
		t.Errorf("%d waits of a pruned run left", len(got))
	}
}

func countType(es []store.Event, typ string) int {
	n := 0
	for _, e := range es {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// testCancelClosesWaits: a canceled run's pending waits are closed in the
// cancel's transaction, not left for their expiry, and a later answer or
// event is refused saying the run was canceled.
func testCancelClosesWaits(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := newRun(t, s, store.CreateRunParams{})
	ask := store.Wait{ID: uniq("wt"), Step: 2, ToolUseID: "toolu_ask", Kind: store.WaitPerson, Name: "ask_person",
		Prompt: json.RawMessage(`{"question":"Refund?"}`), Binding: "b-ask", ExpiresAt: t0.Add(time.Hour)}
	waitFor(t, s, r, t0, ask, eventWait("payment_settled", "toolu_ev"))
	at := t0.Add(time.Minute)
	if _, err := s.(store.Canceler).CancelRun(ctx, store.CancelRunParams{Tenant: r.Tenant, RunID: r.ID, By: "human:ops", Now: at}); err != nil {
		t.Fatal(err)
	}
	ws := waitsOf(t, s, store.ListWaitsParams{Tenant: r.Tenant, RunID: r.ID})
	if len(ws) != 2 {
		t.Fatalf("%d waits, want 2", len(ws))
	}
	for _, w := range ws {
		if w.Status != store.WaitCanceled || w.AnsweredBy != "human:ops" || !w.AnsweredAt.Equal(at) {
			t.Errorf("wait %s after the cancel: %s by %q at %v; want canceled by human:ops at %v", w.Name, w.Status, w.AnsweredBy, w.AnsweredAt, at)
		}
	}
	if n := len(waitsOf(t, s, store.ListWaitsParams{Tenant: r.Tenant, Status: store.WaitPending})); n != 0 {
		t.Errorf("%d waits of the tenant still pending", n)
	}
	answer := store.AnswerWaitParams{Tenant: r.Tenant, RunID: r.ID, ID: ask.ID, Kind: store.WaitPerson, Binding: "b-ask",
		Answer: json.RawMessage(`{"text":"yes"}`), By: "human:ada", Now: at.Add(time.Second)}
	_, _, err := waiter(t, s).AnswerWait(ctx, answer)
	if !errors.Is(err, store.ErrNotWaiting) || !strings.Contains(err.Error(), "the run was canceled") {
		t.Errorf("answer after the cancel: %v; want ErrNotWaiting saying the run was canceled", err)
	}
	_, _, err = waiter(t, s).Signal(ctx, signal(r, "payment_settled", "", `{}`, at.Add(time.Second)))
	if !errors.Is(err, store.ErrNotWaiting) || !strings.Contains(err.Error(), "the run was canceled") {
		t.Errorf("event after the cancel: %v; want ErrNotWaiting saying the run was canceled", err)
	}
	if got := waitsOf(t, s, store.ListWaitsParams{Tenant: r.Tenant, RunID: r.ID}); got[0].Status != store.WaitCanceled || len(got[0].Answer) != 0 {
		t.Errorf("a refused answer changed the wait: %+v", got[0])
	}
}

// testWaitsPages: a tenant's waits filtered by kind, page after page in
// creation order, none twice and none missed.
func testWaitsPages(t *testing.T, s store.Store) {
	tenant := uniq("tenant")
	var want []string
	kinds := []store.WaitKind{store.WaitPerson, store.WaitEvent, store.WaitResult, store.WaitInput}
	for i := range 7 {
		r := newRun(t, s, store.CreateRunParams{Tenant: tenant})
		k := kinds[i%len(kinds)]
		w := store.Wait{ID: uniq("wt"), Step: 1, ToolUseID: "toolu_1", Kind: k, Name: "n" + string(k),
			Prompt: json.RawMessage(`{}`), Binding: "b", ExpiresAt: t0.Add(time.Hour)}
		waitFor(t, s, r, t0.Add(time.Duration(i)*time.Second), w)
		if k == store.WaitPerson || k == store.WaitResult {
			want = append(want, w.ID)
		}
	}
	var got []string
	after := ""
	for range 10 {
		page := waitsOf(t, s, store.ListWaitsParams{Tenant: tenant, Status: store.WaitPending,
			Kinds: []store.WaitKind{store.WaitPerson, store.WaitResult}, After: after, Limit: 2})
		for _, w := range page {
			if w.Kind != store.WaitPerson && w.Kind != store.WaitResult {
				t.Errorf("wait %s of kind %s listed under person, result", w.ID, w.Kind)
			}
			got = append(got, w.ID)
		}
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].ID
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("pages listed %v, want %v", got, want)
	}
	if n := len(waitsOf(t, s, store.ListWaitsParams{Tenant: tenant, Kinds: []store.WaitKind{store.WaitEvent}})); n != 2 {
		t.Errorf("%d event waits, want 2", n)
	}
}

// A tool that asks during its call (an elicitation) writes a wait while the
// run runs and keeps its lease: the answer is recorded and leaves the run
// running, with its lease, and so does the wait's expiry.
func testWaitOfARunningRun(t *testing.T, s store.Store) {
	ctx := t.Context()
	ws := waiter(t, s)
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	w := store.Wait{ID: uniq("wt"), Step: 1, ToolUseID: "toolu_how.q1.abcd", Kind: store.WaitPerson, Name: "refund_how",
		Prompt: json.RawMessage(`{"question":"Card or store credit?","elicitation":{"tool":"refund_how"}}`), Binding: "b-how",
		ExpiresAt: t0.Add(time.Minute)}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: t0, Run: update(claimed), Waits: []store.Wait{w}})
	if got := getRun(t, s, r.ID); got.Status != store.StatusRunning || got.LeaseOwner != "w1" {
		t.Fatalf("run is %s owned by %q after its call asked, want running, owned by w1", got.Status, got.LeaseOwner)
	}
	p := store.AnswerWaitParams{Tenant: r.Tenant, RunID: r.ID, ID: w.ID, Kind: store.WaitPerson,
		Answer: json.RawMessage(`{"action":"accept","content":{"method":"card"}}`), By: "human:bo", Now: t0.Add(time.Second)}
	answered, _, err := ws.AnswerWait(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if answered.Status != store.WaitAnswered || !strings.Contains(string(answered.Answer), "card") {
		t.Errorf("answered %+v", answered)
	}
	if got := getRun(t, s, r.ID); got.Status != store.StatusRunning || got.LeaseOwner != "w1" || got.LeaseEpoch != claimed.LeaseEpoch {
		t.Errorf("run is %s owned by %q (epoch %d) after the answer, want still running under w1's lease", got.Status, got.LeaseOwner, got.LeaseEpoch)
	}
	if got := waitsOf(t, s, store.ListWaitsParams{RunID: r.ID}); len(got) != 1 || got[0].Status != store.WaitAnswered {
		t.Errorf("waits %+v, want the one, answered", got)
	}

	// A second question of the call nobody answers expires, and the run
	// runs on.
	w2 := w
	w2.ID, w2.ToolUseID, w2.Binding = uniq("wt"), "toolu_how.q2.abcd", "b-how-2"
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: t0.Add(2 * time.Second), Run: update(claimed), Waits: []store.Wait{w2}})
	expired, err := ws.ExpireDueWaits(ctx, store.ExpireWaitsParams{Now: w2.ExpiresAt})
	if err != nil {
		t.Fatal(err)
	}
	if len(expired) != 1 || expired[0].Wait.ID != w2.ID {
		t.Fatalf("expired %+v, want the second question", expired)
	}
	if got := getRun(t, s, r.ID); got.Status != store.StatusRunning || got.LeaseOwner != "w1" {
		t.Errorf("run is %s owned by %q after its question expired, want running under w1", got.Status, got.LeaseOwner)
	}
}
