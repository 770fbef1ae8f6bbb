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
