package belay

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// A fork that asks again for an effect its parent made before the fork's
// step gets the parent's result from its own ledger: the tool is not
// called, nobody is asked, and the trace says the effect was reused. The
// fork starts with the parent's usage at the step, and its guard state is
// rebuilt from its history.
func TestForkAnswersTheParentsEffectsFromItsLedger(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	ctx := context.Background()
	var calls atomic.Int32
	type noteIn struct {
		Text string `json:"text"`
	}
	note := NewTool("note", "write a note", Write, func(ctx context.Context, in noteIn) (string, error) {
		calls.Add(1)
		return "note N-1", nil
	})
	// The model notes once, and again when the customer asks it to.
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		last := req.Messages[len(req.Messages)-1]
		results := 0
		for _, msg := range req.Messages {
			for _, b := range msg.Content {
				if b.Type == model.TypeToolResult {
					results++
				}
			}
		}
		if results == 0 || (last.Role == model.RoleUser && strings.Contains(model.JoinText(last.Content), "again")) {
			return scripted.Reply{Calls: []scripted.Call{{Name: "note", Args: noteIn{Text: "charged twice"}}}}, nil
		}
		return scripted.Reply{Text: "done"}, nil
	})
	// The policy lets the parent note and would ask a person about any
	// note of another run: the fork's repeat must not come to it.
	var parentID atomic.Value
	gated := func(_ context.Context, c PolicyCall) (Decision, error) {
		if c.Run.ID == parentID.Load() {
			return Decision{Verdict: Allow}, nil
		}
		return Decision{Verdict: NeedsApproval, Reason: "notes need a person"}, nil
	}
	rt := newRuntime(t, st, nil, &Agent{Name: "a", Model: m, Tools: []Tool{note}, Prices: scripted.Prices,
		Policy: gated, PolicyVersion: "gated"})
	parent, _, err := rt.StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	parentID.Store(parent.ID)
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	parent = getRun(t, st, parent.ID)
	if parent.Status != store.StatusDone || parent.Step != 1 || calls.Load() != 1 {
		t.Fatalf("parent %s at step %d after %d calls", parent.Status, parent.Step, calls.Load())
	}

	fork, err := rt.Fork(ctx, parent.ID, ForkOptions{AtStep: 1, Message: "please note it again", AppendMessage: true, By: "human:fran"})
	if err != nil {
		t.Fatal(err)
	}
	if fork.ModelCalls != 1 || fork.InputTokens == 0 || fork.InputTokens >= parent.InputTokens {
		t.Errorf("fork starts with %d model calls and %d input tokens; the parent had 1 call before step 1, %d tokens in all",
			fork.ModelCalls, fork.InputTokens, parent.InputTokens)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	done := getRun(t, st, fork.ID)
	if done.Status != store.StatusDone || calls.Load() != 1 {
		t.Fatalf("fork %s (%s) with the tool called %d times, want done with it called once in all", done.Status, done.StopReason, calls.Load())
	}
	if as, _ := st.Approvals(ctx, store.ListApprovalsParams{RunID: fork.ID}); len(as) != 0 {
		t.Errorf("the fork asked for %d approvals", len(as))
	}
	if !slices.Contains(eventTypes(t, st, fork.ID), store.EventEffectReused) {
		t.Errorf("fork's trace %v has no effect_reused", eventTypes(t, st, fork.ID))
	}
	var g struct {
		Calls int `json:"calls"`
	}
	if err := json.Unmarshal(done.Guard, &g); err != nil || g.Calls != 2 {
		t.Errorf("fork's guard %s: want its 2 calls, the parent's one counted", done.Guard)
	}
	msgs, err := st.Messages(ctx, fork.ID)
	if err != nil {
		t.Fatal(err)
	}
	blocks, _ := model.DecodeBlocks(msgs[len(msgs)-2].Content)
	if len(blocks) != 1 || !strings.Contains(blocks[0].Content, "note N-1") {
		t.Errorf("the fork's second note answered %+v, want the parent's result", blocks)
	}
}

// A fork gets the time its parent had left at the fork's step, not the
// parent's absolute deadline, which had passed when the fork was made.
func TestForkHasTheTimeItsParentHadLeft(t *testing.T) {
	t.Parallel()
	st, c := openStore(t), newClock()
	ctx := context.Background()
	// The lookup takes ten minutes of the parent's hour.
	lookup := NewTool("lookup", "look the order up", Read, func(context.Context, struct {
		Order string `json:"order"`
	}) (string, error) {
		c.Advance(10 * time.Minute)
		return "shipped", nil
	})
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		if len(toolResults(req.Messages)) == 0 {
			return scripted.Reply{Calls: []scripted.Call{{Name: "lookup", Args: map[string]string{"order": "o-1"}}}}, nil
		}
		return scripted.Reply{Text: "it shipped"}, nil
	})
	rt := newRuntime(t, st, c, &Agent{Name: "a", Model: m, Tools: []Tool{lookup}, Budget: Budget{Deadline: time.Hour}})
	parent, _, err := rt.StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "where is my order?"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if parent = getRun(t, st, parent.ID); parent.Status != store.StatusDone || parent.Step != 1 {
		t.Fatalf("parent %s (%s) at step %d, want done at step 1", parent.Status, parent.StopReason, parent.Step)
	}
	c.Advance(2 * time.Hour) // the parent's deadline has passed
	for _, step := range []int{0, 1} {
		fork, err := rt.Fork(ctx, parent.ID, ForkOptions{AtStep: step, By: "human:fran"})
		if err != nil {
			t.Fatal(err)
		}
		var b runBudget
		if err := json.Unmarshal(fork.Budget, &b); err != nil {
			t.Fatal(err)
		}
		left := time.Hour - time.Duration(step)*10*time.Minute
		if want := c.Now().Add(left); !b.DeadlineAt.Equal(want) {
			t.Errorf("a fork at step %d has its deadline at %s, want %s (the %s its parent had left)", step, b.DeadlineAt, want, left)
		}
		if done := drainRun(t, rt, st, fork.ID); done.Status != store.StatusDone {
			t.Errorf("a fork at step %d is %s (%s: %s), want done within its time", step, done.Status, done.StopReason, done.StopDetail)
		}
	}
}
