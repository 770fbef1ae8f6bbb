package belay

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// An interactive agent whose model is unavailable tries again within its
// MaxWait and then escalates, with its message for the customer, at
// MaxWait after the first failure; a background agent on the same failing
// model is still pausing with resume_after then, minutes from escalating.
func TestInteractiveAgentEscalatesWhenItsModelStaysUnavailable(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	c := newClock()
	var mu sync.Mutex // the two runs may be in steps at once
	calls := map[string]int{}
	failing := func(agent string) model.Model {
		return scripted.Func(func(req model.Request) (scripted.Reply, error) {
			mu.Lock()
			defer mu.Unlock()
			calls[agent]++
			return scripted.Reply{Err: &model.Error{Class: model.ClassOverloaded, StatusCode: 529, Err: errors.New("overloaded")}}, nil
		})
	}
	chat := &Agent{Name: "chat", Model: failing("chat"), Interactive: &Interactive{}}
	batch := &Agent{Name: "batch", Model: failing("batch")}
	rt := newRuntime(t, st, c, chat, batch)
	rt.cfg.rand = func(n int64) int64 { return n - 1 } // each wait the longest of its window
	ctx := context.Background()
	start := c.Now()
	chatRun, _, err := rt.StartRun(ctx, RunRequest{Agent: "chat", User: "u", Input: "where is my order?"})
	if err != nil {
		t.Fatal(err)
	}
	batchRun, _, err := rt.StartRun(ctx, RunRequest{Agent: "batch", User: "u", Input: "reconcile"})
	if err != nil {
		t.Fatal(err)
	}
	var got store.Run
	for range 10 {
		if err := rt.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		got, _ = st.GetRun(ctx, "", chatRun.ID)
		if got.Status != store.StatusPaused {
			break
		}
		if wait := got.ResumeAfter.Sub(c.Now()); wait <= 0 || wait > defaultInteractiveWait {
			t.Fatalf("the interactive run paused for %v, want within its %v", wait, defaultInteractiveWait)
		}
		c.Advance(got.ResumeAfter.Sub(c.Now()))
	}
	if got.Status != store.StatusEscalated || got.StopReason != "model_unavailable" {
		t.Fatalf("interactive run: %s (%s: %s), want escalated for model_unavailable", got.Status, got.StopReason, got.StopDetail)
	}
	if waited := c.Now().Sub(start); waited != defaultInteractiveWait {
		t.Errorf("escalated %v after the first failure, want %v", waited, defaultInteractiveWait)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["chat"] != 3 {
		t.Errorf("%d model calls of the interactive run, want 3 (at 0, 15 s and 20 s)", calls["chat"])
	}
	var packet Escalation
	if err := json.Unmarshal(got.Escalation, &packet); err != nil {
		t.Fatal(err)
	}
	if packet.CustomerMessage != DefaultInteractiveMessage {
		t.Errorf("the customer is told %q, want %q", packet.CustomerMessage, DefaultInteractiveMessage)
	}
	bg, _ := st.GetRun(ctx, "", batchRun.ID)
	if bg.Status != store.StatusPaused || bg.StopReason != "overloaded" || !bg.ResumeAfter.After(c.Now()) {
		t.Errorf("background run at the same time: %s (%s) until %v, want paused for overloaded with resume_after", bg.Status,
			bg.StopReason, bg.ResumeAfter)
	}
}

// A provider that asks for an hour's wait is not waited for by an
// interactive agent: its run escalates at the first failure, with the
// agent's own message and wait.
func TestInteractiveAgentDoesNotWaitOutALongRetryAfter(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	c := newClock()
	limited := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		return scripted.Reply{Err: &model.Error{Class: model.ClassRateLimited, StatusCode: 429, RetryAfter: time.Hour,
			Err: errors.New("rate limited")}}, nil
	})
	const msg = "A colleague will reply here in a minute."
	rt := newRuntime(t, st, c, &Agent{Name: "chat", Model: limited, Interactive: &Interactive{MaxWait: 5 * time.Second, Message: msg}})
	got := startAndDrain(t, rt, RunRequest{Agent: "chat", User: "u", Input: "hi"})
	var packet Escalation
	_ = json.Unmarshal(got.Escalation, &packet)
	if got.Status != store.StatusEscalated || got.StopReason != "model_unavailable" || packet.CustomerMessage != msg {
		t.Fatalf("run: %s (%s), customer told %q; want escalated for model_unavailable, told %q", got.Status, got.StopReason,
			packet.CustomerMessage, msg)
	}
	if _, err := New(Config{Store: st, Agents: []*Agent{{Name: "x", Model: limited, Interactive: &Interactive{MaxWait: -time.Second}}}}); err == nil {
		t.Error("an Interactive.MaxWait below 0 was accepted")
	}
}
