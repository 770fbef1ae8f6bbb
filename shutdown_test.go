package belay

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// Stop lets the step in flight finish and checkpoint, then releases the
// lease so another worker continues at once, without waiting for expiry.
func TestStopFinishesTheStepAndHandsTheRunOver(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	slow := NewTool("slow", "a slow read", Read, func(ctx context.Context, in struct{}) (string, error) {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		return "read", nil
	})
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		if len(req.Messages) < 5 {
			return scripted.Reply{Calls: []scripted.Call{{Name: "slow"}}}, nil
		}
		return scripted.Reply{Text: "done"}, nil
	})
	agent := func() *Agent { return &Agent{Name: "a", Version: "v1", Model: m, Tools: []Tool{slow}} }
	rt := newRuntime(t, st, nil, agent())
	ctx := context.Background()
	run, _, err := rt.StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "go"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	<-entered
	stopped := make(chan error)
	go func() {
		stopCtx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		stopped <- rt.Stop(stopCtx)
	}()
	// The step is still in its tool call when the stop begins.
	testrun.WaitFor(t, "Stop to begin", rt.stopping.Load)
	close(release)
	if err := <-stopped; err != nil {
		t.Fatalf("Stop: %v", err)
	}
	got, _ := st.GetRun(ctx, "", run.ID)
	if got.Step != 1 || got.LeaseOwner != "" || got.Status != store.StatusRunning || !got.LeaseExpires.IsZero() {
		t.Fatalf("after Stop: step %d, owner %q, status %s, lease %v; want step 1 checkpointed and the lease released",
			got.Step, got.LeaseOwner, got.Status, got.LeaseExpires)
	}
	if types := strings.Join(eventTypes(t, st, run.ID), " "); !strings.HasSuffix(types, "checkpoint released") {
		t.Errorf("events end %q, want the step's checkpoint then the release", types)
	}

	// Another worker takes it at once: no lease to wait out.
	next := newRuntime(t, st, nil, agent())
	if err := next.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ = st.GetRun(ctx, "", run.ID)
	if got.Status != store.StatusDone || calls.Load() != 2 {
		t.Errorf("run %s after %d calls; want done after 2", got.Status, calls.Load())
	}
}
