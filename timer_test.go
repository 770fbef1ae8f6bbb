package belay

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// A tool asks to come back in 48 hours: the run sleeps on the store's
// timer, is not due before, and after a restart goes on with the model
// told the time has passed; the tool is called once.
func TestResumeAfterSleepsDurably(t *testing.T) {
	st, c := openStore(t), newClock()
	var calls atomic.Int32
	checkLater := NewTool("check_later", "look again later", Read, func(ctx context.Context, in struct{}) (string, error) {
		calls.Add(1)
		return "", ResumeAfter(48 * time.Hour)
	})
	agent := func() *Agent {
		m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
			if results := toolResults(req.Messages); len(results) > 0 {
				return scripted.Reply{Text: "after the wait: " + results[0]}, nil
			}
			return scripted.Reply{Text: "I will check in 48 h.", Calls: []scripted.Call{{Name: "check_later"}}}, nil
		})
		return &Agent{Name: "a", Version: "v1", Model: m, Tools: []Tool{checkLater}}
	}
	rt := newRuntime(t, st, c, agent())
	ctx := context.Background()
	start := c.Now()
	run, _, err := rt.StartRun(ctx, RunRequest{Agent: "a", Input: "refund, then make sure it landed"})
	if err != nil {
		t.Fatal(err)
	}
	got := drainRun(t, rt, st, run.ID)
	if got.Status != store.StatusPaused || got.StopReason != "sleeping" || !got.ResumeAfter.Equal(start.Add(48*time.Hour)) || got.LeaseOwner != "" {
		t.Fatalf("run is %s (%s) until %v owned by %q; want paused, sleeping 48 h, no lease", got.Status, got.StopReason, got.ResumeAfter, got.LeaseOwner)
	}
	c.Advance(47 * time.Hour)
	if got := drainRun(t, rt, st, run.ID); got.Status != store.StatusPaused || got.ModelCalls != 1 {
		t.Fatalf("before its time the run is %s after %d model calls", got.Status, got.ModelCalls)
	}
	c.Advance(time.Hour)
	got = drainRun(t, newRuntime(t, st, c, agent()), st, run.ID)
	if got.Status != store.StatusDone || !strings.Contains(got.Final, "has passed") || !got.ResumeAfter.IsZero() {
		t.Fatalf("after its time: run %s with %q (resume_after %v); want done, told the time passed", got.Status, got.Final, got.ResumeAfter)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the tool was called %d times, want once", n)
	}
}

func TestNotBeforeStartsLater(t *testing.T) {
	st, c := openStore(t), newClock()
	m := scripted.Func(func(model.Request) (scripted.Reply, error) { return scripted.Reply{Text: "good morning"}, nil })
	rt := newRuntime(t, st, c, &Agent{Name: "a", Version: "v1", Model: m})
	ctx := context.Background()
	run, _, err := rt.StartRun(ctx, RunRequest{Agent: "a", Input: "remind me", NotBefore: c.Now().Add(2 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != store.StatusPaused || run.StopReason != "not_before" {
		t.Fatalf("a delayed run starts %s (%s)", run.Status, run.StopReason)
	}
	c.Advance(2*time.Hour - time.Second)
	if got := drainRun(t, rt, st, run.ID); got.Status != store.StatusPaused || got.ModelCalls != 0 {
		t.Fatalf("before its time the run is %s after %d model calls", got.Status, got.ModelCalls)
	}
	c.Advance(time.Second)
	if got := drainRun(t, rt, st, run.ID); got.Status != store.StatusDone || got.Final != "good morning" {
		t.Errorf("at its time the run is %s with %q", got.Status, got.Final)
	}
}

// A side effect's tool that did nothing asks to come back later: its
// failure is in the ledger before the run sleeps, the call is not made
// again at the time, and the model's new call, under the same key, is.
func TestResumeAfterFromASideEffect(t *testing.T) {
	st, c := openStore(t), newClock()
	var calls atomic.Int32
	type refundIn struct {
		Order string `json:"order"`
	}
	refund := NewTool("refund", "refund an order", Write, func(ctx context.Context, in refundIn) (string, error) {
		if calls.Add(1) == 1 {
			return "", ResumeAfter(time.Hour) // the bank is closed
		}
		return "refunded " + in.Order, nil
	})
	refund.KeyFields = []string{"order"}
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		results := toolResults(req.Messages)
		switch {
		case len(results) == 0:
			return scripted.Reply{Calls: []scripted.Call{{Name: "refund", Args: refundIn{Order: "A-1"}}}}, nil
		case len(results) == 1:
			return scripted.Reply{Calls: []scripted.Call{{Name: "refund", Args: refundIn{Order: "A-1"}}}}, nil
		}
		return scripted.Reply{Text: "done: " + results[len(results)-1]}, nil
	})
	rt := newRuntime(t, st, c, &Agent{Name: "a", Version: "v1", Model: m, Tools: []Tool{refund}})
	run, _, err := rt.StartRun(context.Background(), RunRequest{Agent: "a", Input: "refund A-1"})
	if err != nil {
		t.Fatal(err)
	}
	got := drainRun(t, rt, st, run.ID)
	if got.Status != store.StatusPaused || got.StopReason != "sleeping" {
		t.Fatalf("run is %s (%s); want paused, sleeping", got.Status, got.StopReason)
	}
	effects, err := st.Effects(context.Background(), AnyTenant, run.ID)
	if err != nil || len(effects) != 1 || effects[0].State != store.EffectFailed {
		t.Fatalf("effects while the run sleeps: %+v, %v; want the call recorded failed", effects, err)
	}
	c.Advance(time.Hour)
	got = drainRun(t, rt, st, run.ID)
	if got.Status != store.StatusDone || got.Final != `done: "refunded A-1"` && got.Final != "done: refunded A-1" {
		t.Fatalf("after its time: run %s with %q; want done, refunded", got.Status, got.Final)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the tool was called %d times; want twice: once asking to wait, once by the model's new call", n)
	}
	effects, _ = st.Effects(context.Background(), AnyTenant, run.ID)
	if len(effects) != 1 || effects[0].State != store.EffectDone {
		t.Errorf("effects at the end: %+v; want the one key, done", effects)
	}
}
