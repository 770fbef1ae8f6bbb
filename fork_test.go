package belay

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

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
