package belay

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// settlingAgent waits for the payment to settle, then says what the event
// said (or what the wait's result said).
func settlingAgent() *Agent {
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		if results := toolResults(req.Messages); len(results) > 0 {
			return scripted.Reply{Text: "event: " + results[0]}, nil
		}
		return scripted.Reply{Text: "Waiting.", Calls: []scripted.Call{{Name: WaitForEventTool,
			Args: map[string]string{"name": "payment_settled"}}}}, nil
	})
	return &Agent{Name: "settle", Version: "v1", Model: m, Events: &Events{Timeout: 48 * time.Hour}}
}

func TestEventAfterTheWait(t *testing.T) {
	st, c := openStore(t), newClock()
	rt := newRuntime(t, st, c, settlingAgent())
	ctx := context.Background()
	op := rt.Operator()
	run, _, err := rt.StartRun(ctx, RunRequest{Agent: "settle", Tenant: "acme", User: "ada", Input: "refund when paid"})
	if err != nil {
		t.Fatal(err)
	}
	got := drainRun(t, rt, st, run.ID)
	if got.Status != store.StatusWaitingInput || got.StopDetail != "waits for the event payment_settled" {
		t.Fatalf("run is %s (%s), want waiting_input for the event", got.Status, got.StopDetail)
	}
	if out, _ := st.Outbox(ctx, run.ID); len(out) != 0 {
		t.Errorf("an event wait notified %+v; nobody is asked", out)
	}
	// Another event is kept, and wakes nothing.
	if sent, err := op.Signal(ctx, "acme", run.ID, Event{Name: "refund_landed"}); err != nil || sent.Signal.ConsumedBy != "" {
		t.Fatalf("another event: %+v, %v", sent, err)
	}
	if again := drainRun(t, rt, st, run.ID); again.Status != store.StatusWaitingInput {
		t.Fatalf("after another event the run is %s", again.Status)
	}
	c.Advance(3 * time.Hour)
	sent, err := op.Signal(ctx, "acme", run.ID, Event{Name: "payment_settled", Payload: json.RawMessage(`{"amount":288}`), Key: "evt-1"})
	if err != nil || sent.Signal.ConsumedBy == "" || sent.Repeated {
		t.Fatalf("the event: %+v, %v; want it to answer the wait", sent, err)
	}
	if again, err := op.Signal(ctx, "acme", run.ID, Event{Name: "payment_settled", Payload: json.RawMessage(`{"amount": 288}`), Key: "evt-1"}); err != nil || !again.Repeated {
		t.Errorf("the event again under its key: %+v, %v", again, err)
	}
	got = drainRun(t, rt, st, run.ID)
	if got.Status != store.StatusDone || got.Final != `event: {"amount":288}` {
		t.Fatalf("run ended %s with %q", got.Status, got.Final)
	}
	if _, err := op.Signal(ctx, "acme", run.ID, Event{Name: "payment_settled"}); !errors.Is(err, store.ErrNotWaiting) {
		t.Errorf("an event to the ended run: %v, want ErrNotWaiting", err)
	}
	if _, err := op.Signal(ctx, "globex", run.ID, Event{Name: "payment_settled"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an event from another tenant: %v, want ErrNotFound", err)
	}
	for _, bad := range []Event{{Name: ""}, {Name: "has spaces"}, {Name: "ok", Payload: json.RawMessage(`{`)}} {
		if _, err := op.Signal(ctx, "acme", run.ID, bad); !errors.Is(err, ErrInvalidEvent) {
			t.Errorf("event %+v: %v, want ErrInvalidEvent", bad, err)
		}
	}
}

func TestEventBeforeTheWait(t *testing.T) {
	st, c := openStore(t), newClock()
	rt := newRuntime(t, st, c, settlingAgent())
	ctx := context.Background()
	run, _, err := rt.StartRun(ctx, RunRequest{Agent: "settle", Tenant: "acme", User: "ada", Input: "refund when paid"})
	if err != nil {
		t.Fatal(err)
	}
	// The payment settles before the run has even started.
	sent, err := rt.Operator().Signal(ctx, "acme", run.ID, Event{Name: "payment_settled", Payload: json.RawMessage(`"early"`)})
	if err != nil || sent.Signal.ConsumedBy != "" {
		t.Fatalf("the early event: %+v, %v; want it kept", sent, err)
	}
	got := drainRun(t, rt, st, run.ID)
	if got.Status != store.StatusDone || got.Final != `event: "early"` {
		t.Fatalf("run ended %s (%s) with %q; want the kept event consumed when the wait began", got.Status, got.StopDetail, got.Final)
	}
	waits, _ := st.Waits(ctx, store.ListWaitsParams{RunID: run.ID})
	if len(waits) != 1 || waits[0].Status != store.WaitAnswered || waits[0].AnsweredBy != store.SignalAnswerer {
		t.Errorf("waits %+v; want one, answered by the kept signal", waits)
	}
}

func TestEventTimeout(t *testing.T) {
	st, c := openStore(t), newClock()
	rt := newRuntime(t, st, c, settlingAgent())
	ctx := context.Background()
	run, _, err := rt.StartRun(ctx, RunRequest{Agent: "settle", Tenant: "acme", User: "ada", Input: "refund when paid"})
	if err != nil {
		t.Fatal(err)
	}
	drainRun(t, rt, st, run.ID)
	c.Advance(47 * time.Hour)
	if got := drainRun(t, rt, st, run.ID); got.Status != store.StatusWaitingInput {
		t.Fatalf("before its timeout the run is %s", got.Status)
	}
	c.Advance(time.Hour)
	got := drainRun(t, rt, st, run.ID)
	if got.Status != store.StatusDone || !strings.Contains(got.Final, `No event "payment_settled" came within 48h0m0s`) {
		t.Fatalf("after the timeout: run %s with %q; want the model told no event came", got.Status, got.Final)
	}
}
