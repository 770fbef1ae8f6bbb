package belay

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// recorder is an Observer that keeps every event it is told, with the run
// it was told of.
type recorder struct {
	mu   sync.Mutex
	seen []observation
}

type observation struct {
	run ObservedRun
	ev  store.Event
}

func (r *recorder) Event(run ObservedRun, ev store.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, observation{run, ev})
}

func (r *recorder) Checkpoint(ObservedRun, time.Duration) {}

// sawTheTrace checks that rec was told of every event of the run's trace
// exactly once, in the trace's order, with the data the store holds, and
// named the run the same way each time.
func sawTheTrace(t *testing.T, st store.Store, rec *recorder, runID string) []store.Event {
	t.Helper()
	stored, err := st.Events(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	run, err := st.GetRun(context.Background(), "", runID)
	if err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var seen []observation
	for _, o := range rec.seen {
		if o.run.ID == runID {
			seen = append(seen, o)
		}
	}
	types := func(evs []store.Event) []string {
		var ts []string
		for _, e := range evs {
			ts = append(ts, e.Type)
		}
		return ts
	}
	var observed []store.Event
	for _, o := range seen {
		observed = append(observed, o.ev)
	}
	if len(observed) != len(stored) {
		t.Fatalf("observed %d events, the trace holds %d:\nobserved %v\n  stored %v", len(observed), len(stored), types(observed), types(stored))
	}
	for i, s := range stored {
		o := observed[i]
		if o.Type != s.Type || o.Step != s.Step || !o.Time.Equal(s.Time) || !bytes.Equal(o.Data, s.Data) {
			t.Errorf("event %d observed as %s (step %d, %s) %s\n  stored as %s (step %d, %s) %s", i,
				o.Type, o.Step, o.Time, o.Data, s.Type, s.Step, s.Time, s.Data)
		}
		if who := seen[i].run; who.Tenant != run.Tenant || who.Agent != run.Agent || who != seen[0].run {
			t.Errorf("%s observed for %+v; want the run %s of %s/%s named as for its other events (%+v)",
				o.Type, who, run.ID, run.Tenant, run.Agent, seen[0].run)
		}
	}
	return stored
}

// only returns the one event of that type, or fails.
func only(t *testing.T, evs []store.Event, typ string) map[string]any {
	t.Helper()
	var found []store.Event
	for _, e := range evs {
		if e.Type == typ {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s events, want 1", len(found), typ)
	}
	var data map[string]any
	if err := json.Unmarshal(found[0].Data, &data); err != nil {
		t.Fatal(err)
	}
	return data
}

// observedApprovalFixture is the approval fixture with its runtime observed
// from before the run starts.
func observedApprovalFixture(t *testing.T, rec *recorder) *approvalFixture {
	t.Helper()
	f := &approvalFixture{st: openStore(t), clock: newClock(), world: &approvalWorld{}}
	f.rt = f.runtime(t, "default")
	f.rt.cfg.Observer = rec
	run, _, err := f.rt.StartRun(context.Background(), RunRequest{Agent: "a", Tenant: "acme", User: "ada", Input: "refund my duplicate charge"})
	if err != nil {
		t.Fatal(err)
	}
	f.run = run
	return f
}

// Config.Observer sees every event a runtime makes durable, once: those of
// its steps, of its approval-expiry sweep, and of the operations people
// make through it.
func TestObserverSeesEveryDurableEventOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("approval expired", func(t *testing.T) {
		t.Parallel()
		rec := &recorder{}
		f := observedApprovalFixture(t, rec)
		a := f.waitForApproval(t)
		f.clock.Advance(DefaultApprovalTTL + time.Second)
		if run := f.drain(t, f.rt); run.StopReason != "approval_expired" {
			t.Fatalf("run %s (%s), want it to go on once the approval expired", run.Status, run.StopReason)
		}
		d := only(t, sawTheTrace(t, f.st, rec, f.run.ID), "approval_expired")
		if d["approval_id"] != a.ID || d["category"] != "refund" || d["tool"] != "refund" || d["by"] != "policy:expiry" {
			t.Errorf("approval_expired %v: want the approval, its category, tool and decider", d)
		}
	})

	t.Run("approval decided", func(t *testing.T) {
		t.Parallel()
		rec := &recorder{}
		f := observedApprovalFixture(t, rec)
		a := f.waitForApproval(t)
		if _, err := f.rt.Decide(ctx, "acme", a.ID, ApprovalDecision{Verdict: "approve", By: "human:maya", Note: "checked"}); err != nil {
			t.Fatal(err)
		}
		if run := f.drain(t, f.rt); run.Status != store.StatusDone {
			t.Fatalf("run %s (%s)", run.Status, run.StopReason)
		}
		if d := only(t, sawTheTrace(t, f.st, rec, f.run.ID), "approval_decided"); d["by"] != "human:maya" || d["category"] != "refund" {
			t.Errorf("approval_decided %v", d)
		}
	})

	t.Run("resumed", func(t *testing.T) {
		t.Parallel()
		st, rec := openStore(t), &recorder{}
		agent := &Agent{Name: "a", Model: scripted.New(
			scripted.Reply{Calls: []scripted.Call{{Name: "lookup", Args: map[string]string{"id": "A-1"}}}},
			scripted.Reply{Text: "done"}), Tools: []Tool{lookupTool()}, Budget: Budget{MaxTurns: 1}}
		rt := newRuntime(t, st, newClock(), agent)
		rt.cfg.Observer = rec
		run := startAndDrain(t, rt, RunRequest{Agent: "a", User: "u", Input: "go"})
		if run.StopReason != "max_turns" {
			t.Fatalf("run %s (%s), want paused on max_turns", run.Status, run.StopReason)
		}
		if _, err := rt.Resume(ctx, "", run.ID, Raise{Turns: 1}, "human:ops"); err != nil {
			t.Fatal(err)
		}
		if err := rt.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		if d := only(t, sawTheTrace(t, st, rec, run.ID), "resumed"); d["by"] != "human:ops" {
			t.Errorf("resumed %v", d)
		}
	})

	t.Run("migrated", func(t *testing.T) {
		t.Parallel()
		st, rec, c := openStore(t), &recorder{}, newClock()
		old := newRuntime(t, st, c, &Agent{Name: "a", Instructions: "be brief", Model: scripted.New()})
		old.cfg.Observer = rec
		run, _, err := old.StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "hi"})
		if err != nil {
			t.Fatal(err)
		}
		rt := newRuntime(t, st, c, &Agent{Name: "a", Instructions: "be thorough", Model: scripted.New(scripted.Reply{Text: "done"})})
		rt.cfg.Observer = rec
		if err := rt.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := rt.MigrateRun(ctx, "", run.ID, "human:ops"); err != nil {
			t.Fatal(err)
		}
		if err := rt.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		if d := only(t, sawTheTrace(t, st, rec, run.ID), "migrated"); d["by"] != "human:ops" {
			t.Errorf("migrated %v", d)
		}
	})

	t.Run("outcome resolved", func(t *testing.T) {
		t.Parallel()
		st, rec := openStore(t), &recorder{}
		p := &payments{loseNext: 1}
		agent := &Agent{Name: "a", Model: scripted.New(
			scripted.Reply{Calls: []scripted.Call{refundCall("CH-2", 29)}},
			scripted.Reply{Text: "refunded"}), Tools: []Tool{refundTool(p, false)}}
		rt := newRuntime(t, st, newClock(), agent)
		rt.cfg.Observer = rec
		run := startAndDrain(t, rt, RunRequest{Agent: "a", User: "u", Input: "refund"})
		if run.StopReason != "unknown_outcome" {
			t.Fatalf("run %s (%s), want paused on unknown_outcome", run.Status, run.StopReason)
		}
		o := Outcome{Key: effectsOf(t, st, run.ID)[0].Key, Applied: true, Result: json.RawMessage(`{"refund_id":"R-1"}`)}
		if _, err := rt.ResolveOutcome(ctx, "", run.ID, o, "human:ops"); err != nil {
			t.Fatal(err)
		}
		if err := rt.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		if d := only(t, sawTheTrace(t, st, rec, run.ID), "outcome_resolved"); d["by"] != "human:ops" || d["applied"] != true {
			t.Errorf("outcome_resolved %v", d)
		}
	})

	t.Run("canceled", func(t *testing.T) {
		t.Parallel()
		rec := &recorder{}
		d := newCardDesk(t, nil, true)
		d.rt.cfg.Observer = rec
		run := d.run(t, "")
		if _, err := d.rt.Cancel(ctx, "acme", run.ID, "human:maya", "customer withdrew"); err != nil {
			t.Fatal(err)
		}
		if data := only(t, sawTheTrace(t, d.st, rec, run.ID), "canceled"); data["by"] != "human:maya" {
			t.Errorf("canceled %v", data)
		}
	})
}
