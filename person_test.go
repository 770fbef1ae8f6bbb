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

// answerAgent calls first, the first turn's call, then says the result it
// read.
func answerAgent(first scripted.Call, configure func(*Agent)) *Agent {
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		for _, b := range req.Messages[len(req.Messages)-1].Content {
			if b.Type == model.TypeToolResult {
				prefix := "answer: "
				if b.IsError {
					prefix = "error: "
				}
				return scripted.Reply{Text: prefix + b.Content}, nil
			}
		}
		return scripted.Reply{Text: "Asking.", Calls: []scripted.Call{first}}, nil
	})
	a := &Agent{Name: "a", Version: "v1", Model: m}
	configure(a)
	return a
}

// waitingCall starts a run of agent and drains it to its wait; it returns
// the run and the call that waits.
func waitingCall(t *testing.T, st store.Store, rt *Runtime) (store.Run, store.Wait) {
	t.Helper()
	run, _, err := rt.StartRun(context.Background(), RunRequest{Agent: "a", Tenant: "acme", User: "ada", Input: "help"})
	if err != nil {
		t.Fatal(err)
	}
	if got := drainRun(t, rt, st, run.ID); got.Status != store.StatusWaitingInput {
		t.Fatalf("run is %s (%s), want waiting_input", got.Status, got.StopDetail)
	}
	ws, err := st.(store.Waiter).Waits(context.Background(), store.ListWaitsParams{RunID: run.ID})
	if err != nil || len(ws) != 1 {
		t.Fatalf("waits %+v, %v", ws, err)
	}
	return run, ws[0]
}

func TestAskPerson(t *testing.T) {
	st, c := openStore(t), newClock()
	agent := answerAgent(scripted.Call{Name: AskPersonTool, Args: map[string]any{"question": "Refund a customer of 9 years beyond policy?",
		"choices": []string{"yes", "no"}}}, func(a *Agent) { a.People = &People{} })
	rt := newRuntime(t, st, c, agent)
	ctx := context.Background()
	op := rt.Operator()
	run, w := waitingCall(t, st, rt)
	if w.Kind != store.WaitPerson || !w.ExpiresAt.Equal(c.Now().Add(DefaultPersonTimeout)) {
		t.Errorf("wait %+v", w)
	}
	out, _ := st.Outbox(ctx, run.ID)
	if len(out) != 1 || out[0].Kind != "input_requested" || !strings.Contains(string(out[0].Payload), `"role":"approver"`) ||
		!strings.Contains(string(out[0].Payload), `"call_id":"`+w.ToolUseID+`"`) {
		t.Errorf("outbox %+v, want the question for an approver, naming its call", out)
	}
	answer := func(v string, roles ...store.Role) error {
		_, err := op.PostResult(ctx, "acme", run.ID, w.ToolUseID, Result{Value: json.RawMessage(v), By: "human:maya", Roles: roles})
		return err
	}
	if err := answer(`"yes"`, store.RoleOperator); !errors.Is(err, ErrNotYourQuestion) {
		t.Errorf("an operator's answer to an approver's question: %v, want ErrNotYourQuestion", err)
	}
	if err := answer(`"maybe"`, store.RoleApprover); !errors.Is(err, ErrWrongAnswer) {
		t.Errorf("an answer not among the choices: %v, want ErrWrongAnswer", err)
	}
	if err := answer(`{"yes": true}`, store.RoleApprover); !errors.Is(err, ErrWrongAnswer) {
		t.Errorf("an answer that is not text: %v, want ErrWrongAnswer", err)
	}
	if _, err := op.PostResult(ctx, "globex", run.ID, w.ToolUseID, Result{Value: json.RawMessage(`"yes"`), By: "human:x"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an answer from another tenant: %v, want ErrNotFound", err)
	}
	if _, err := op.PostResult(ctx, "acme", run.ID, w.ToolUseID, Result{Value: json.RawMessage(`"yes"`), By: "human:maya", Binding: "forged"}); !errors.Is(err, store.ErrBindingMismatch) {
		t.Errorf("an answer with a forged binding: %v, want ErrBindingMismatch", err)
	}
	if err := answer(`"yes"`, store.RoleApprover); err != nil {
		t.Fatal(err)
	}
	if err := answer(`"no"`, store.RoleApprover); !errors.Is(err, store.ErrNotWaiting) {
		t.Errorf("a second answer: %v, want ErrNotWaiting", err)
	}
	if got := drainRun(t, rt, st, run.ID); got.Status != store.StatusDone || got.Final != "answer: yes" {
		t.Errorf("run %s with %q, want done with the answer", got.Status, got.Final)
	}
}

func TestAskPersonNobodyAnswers(t *testing.T) {
	st, c := openStore(t), newClock()
	agent := answerAgent(scripted.Call{Name: AskPersonTool, Args: map[string]any{"question": "Approve the exception?"}},
		func(a *Agent) { a.People = &People{Timeout: time.Hour, Default: "Refuse the exception politely."} })
	rt := newRuntime(t, st, c, agent)
	run, w := waitingCall(t, st, rt)
	c.Advance(time.Hour)
	got := drainRun(t, rt, st, run.ID)
	if got.Status != store.StatusDone || got.Final != "error: No one answered within 1h0m0s. Refuse the exception politely." {
		t.Fatalf("run %s with %q; want the stated default", got.Status, got.Final)
	}
	if _, err := rt.Operator().PostResult(context.Background(), "acme", run.ID, w.ToolUseID, Result{Value: json.RawMessage(`"yes"`), By: "human:maya"}); !errors.Is(err, store.ErrWaitExpired) {
		t.Errorf("a late answer: %v, want ErrWaitExpired", err)
	}
}

func TestDeferredTool(t *testing.T) {
	st, c := openStore(t), newClock()
	ship := Tool{Name: "ship_order", Description: "ship it; the warehouse answers", Deferred: &Deferred{Timeout: 2 * time.Hour}}
	agent := answerAgent(scripted.Call{Name: "ship_order", Args: map[string]string{"order": "A-1"}},
		func(a *Agent) { a.Tools = []Tool{ship}; a.Policy, a.PolicyVersion = allowAll, "allow-all" })
	rt := newRuntime(t, st, c, agent)
	ctx := context.Background()
	run, w := waitingCall(t, st, rt)
	if w.Kind != store.WaitResult || w.Name != "ship_order" || !strings.Contains(string(w.Prompt), "A-1") {
		t.Errorf("wait %+v", w)
	}
	if out, _ := st.Outbox(ctx, run.ID); len(out) != 0 {
		t.Errorf("a deferred call notified %+v", out)
	}
	said, err := rt.Operator().PostResult(ctx, "acme", run.ID, w.ToolUseID, Result{Value: json.RawMessage(`{"tracking":"TRK-9"}`),
		By: "system:warehouse", Key: "wh-1"})
	if err != nil || said.Repeated {
		t.Fatalf("post: %+v, %v", said, err)
	}
	if got := drainRun(t, rt, st, run.ID); got.Status != store.StatusDone || got.Final != `answer: {"tracking":"TRK-9"}` {
		t.Errorf("run %s with %q, want done with the posted result", got.Status, got.Final)
	}

	// A failure posted is read as one; no result in time is an is_error.
	run2, w2 := waitingCall(t, st, rt)
	if _, err := rt.Operator().PostResult(ctx, "acme", run2.ID, w2.ToolUseID, Result{Value: json.RawMessage(`"out of stock"`), IsError: true, By: "system:warehouse"}); err != nil {
		t.Fatal(err)
	}
	if got := drainRun(t, rt, st, run2.ID); got.Final != `error: "out of stock"` {
		t.Errorf("a posted failure: %q", got.Final)
	}
	run3, _ := waitingCall(t, st, rt)
	c.Advance(2 * time.Hour)
	if got := drainRun(t, rt, st, run3.ID); !strings.HasPrefix(got.Final, "error: No result of this call came within 2h0m0s") {
		t.Errorf("no result in time: %q", got.Final)
	}
}
