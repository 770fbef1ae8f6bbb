package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// The cases of signals: a named event sent to a run answers its wait for
// that name, or is kept until the run waits for it.

// eventWait is a wait of run r's step for the event name.
func eventWait(name, toolUse string) store.Wait {
	return store.Wait{ID: uniq("wt"), Step: 3, ToolUseID: toolUse, Kind: store.WaitEvent, Name: name,
		Prompt: json.RawMessage(`{"name":"` + name + `"}`), Binding: "b-" + name, ExpiresAt: t0.Add(time.Hour)}
}

// waitFor parks run r, claimed, in waiting_input on the waits ws.
func waitFor(t *testing.T, s store.Store, r store.Run, now time.Time, ws ...store.Wait) {
	t.Helper()
	c := claimRun(t, s, r.ID, uniq("w"), now, time.Hour)
	u := update(c)
	u.Status, u.LeaseExpires = store.StatusWaitingInput, time.Time{}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(c), Now: now, Run: u, Waits: ws})
}

func signal(r store.Run, name, key, payload string, now time.Time) store.SignalParams {
	return store.SignalParams{Tenant: r.Tenant, RunID: r.ID, ID: uniq("sg"), Name: name, Key: key,
		Payload: json.RawMessage(payload), Now: now}
}

func testSignalAnswersWait(t *testing.T, s store.Store) {
	ctx := t.Context()
	ws := waiter(t, s)
	r := newRun(t, s, store.CreateRunParams{})
	w := eventWait("payment_settled", "toolu_w")
	waitFor(t, s, r, t0, w)

	if _, _, err := ws.Signal(ctx, signal(store.Run{Tenant: uniq("tenant"), ID: r.ID}, "payment_settled", "k1", `{}`, t0)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a signal from another tenant: %v, want ErrNotFound", err)
	}
	// Another name is kept; the run still waits.
	other, _, err := ws.Signal(ctx, signal(r, "refund_landed", "k0", `{"id":"RF-1"}`, t0))
	if err != nil || other.ConsumedBy != "" {
		t.Fatalf("a signal of another name: %+v, %v; want it kept", other, err)
	}
	if got := getRun(t, s, r.ID); got.Status != store.StatusWaitingInput {
		t.Fatalf("a signal of another name left the run %s", got.Status)
	}
	sent, repeated, err := ws.Signal(ctx, signal(r, "payment_settled", "k1", `{"amount": 12}`, t0.Add(time.Minute)))
	if err != nil || repeated || sent.ConsumedBy != w.ID {
		t.Fatalf("the signal: %+v repeated=%v, %v; want it to answer %s", sent, repeated, err, w.ID)
	}
	got := waitsOf(t, s, store.ListWaitsParams{RunID: r.ID})
	if len(got) != 1 || got[0].Status != store.WaitAnswered || !sameJSON(got[0].Answer, `{"amount": 12}`) || got[0].AnsweredBy != store.SignalAnswerer {
		t.Errorf("the wait after the signal: %+v", got)
	}
	if run := getRun(t, s, r.ID); run.Status != store.StatusQueued {
		t.Errorf("run is %s once its event came, want queued", run.Status)
	}
	// Sent again under its key: the same signal, nothing new; with another
	// payload, refused.
	again, repeated, err := ws.Signal(ctx, signal(r, "payment_settled", "k1", `{"amount":12}`, t0.Add(2*time.Minute)))
	if err != nil || !repeated || again.ID != sent.ID {
		t.Errorf("the signal again: %+v repeated=%v, %v", again, repeated, err)
	}
	if _, _, err := ws.Signal(ctx, signal(r, "payment_settled", "k1", `{"amount":13}`, t0)); !errors.Is(err, store.ErrAnswerKeyReused) {
		t.Errorf("the key with another payload: %v, want ErrAnswerKeyReused", err)
	}
	if n := countType(events(t, s, r.ID), store.EventSignalReceived); n != 2 {
		t.Errorf("%d signal_received events, want 2 (the kept one and the answer)", n)
	}
}

func testSignalKeptUntilWait(t *testing.T, s store.Store) {
	ctx := t.Context()
	ws := waiter(t, s)
	r := newRun(t, s, store.CreateRunParams{})
	first, _, err := ws.Signal(ctx, signal(r, "payment_settled", "", `{"n":1}`, t0))
	if err != nil || first.ConsumedBy != "" {
		t.Fatalf("a signal before the wait: %+v, %v; want it kept", first, err)
	}
	if _, _, err := ws.Signal(ctx, signal(r, "payment_settled", "", `{"n":2}`, t0.Add(time.Second))); err != nil {
		t.Fatal(err)
	}
	if got := getRun(t, s, r.ID); got.Status != store.StatusQueued {
		t.Fatalf("a kept signal changed the run to %s", got.Status)
	}
	// The wait begins: the oldest kept signal answers it in the checkpoint
	// that makes the run wait, and the run is due again at once.
	w := eventWait("payment_settled", "toolu_1")
	waitFor(t, s, r, t0.Add(time.Minute), w)
	got := waitsOf(t, s, store.ListWaitsParams{RunID: r.ID})
	if len(got) != 1 || got[0].Status != store.WaitAnswered || !sameJSON(got[0].Answer, `{"n":1}`) {
		t.Fatalf("the wait on a kept signal: %+v; want it answered by the first", got)
	}
	if run := getRun(t, s, r.ID); run.Status != store.StatusQueued {
		t.Errorf("run is %s after its wait was answered at once, want queued", run.Status)
	}
	// The second wait takes the second signal; the third waits.
	waitFor(t, s, r, t0.Add(2*time.Minute), eventWait("payment_settled", "toolu_2"))
	waitFor(t, s, r, t0.Add(3*time.Minute), eventWait("payment_settled", "toolu_3"))
	got = waitsOf(t, s, store.ListWaitsParams{RunID: r.ID})
	if len(got) != 3 || !sameJSON(got[1].Answer, `{"n":2}`) || got[2].Status != store.WaitPending {
		t.Errorf("three waits on two signals: %+v", got)
	}
	if run := getRun(t, s, r.ID); run.Status != store.StatusWaitingInput {
		t.Errorf("run is %s with its third wait pending", run.Status)
	}
}

func testSignalToEndedRun(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{})
	c := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	u := update(c)
	u.Status, u.LeaseExpires = store.StatusDone, time.Time{}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(c), Now: t0, Run: u})
	if _, _, err := waiter(t, s).Signal(t.Context(), signal(r, "payment_settled", "k1", `{}`, t0)); !errors.Is(err, store.ErrNotWaiting) {
		t.Errorf("a signal to a done run: %v, want ErrNotWaiting", err)
	}
}

func sameJSON(raw json.RawMessage, want string) bool {
	var a, b any
	return json.Unmarshal(raw, &a) == nil && json.Unmarshal([]byte(want), &b) == nil && jsonEqual(a, b)
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
