package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/client"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// conciergeAgent asks its user how to refund, and says what it did with
// the reply.
func conciergeAgent() *belay.Agent {
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		for _, b := range req.Messages[len(req.Messages)-1].Content {
			if b.Type == model.TypeToolResult {
				return scripted.Reply{Text: "Refunded as " + b.Content + "."}, nil
			}
		}
		return scripted.Reply{Text: "Asking.", Calls: []scripted.Call{{Name: belay.AskUserTool,
			Args: map[string]string{"question": "Card or store credit?"}}}}, nil
	})
	return &belay.Agent{Name: "concierge", Version: "v1", Model: m, Conversation: &belay.Conversation{IdleTimeout: time.Hour}}
}

func TestSay(t *testing.T) {
	t.Parallel()
	ts := newServer(t)
	ctx := t.Context()
	c := newClient(t, ts, ts.key("ops", store.RoleOperator))
	run, err := c.CreateRun(ctx, client.RunRequest{Agent: "concierge", User: "ada", Input: "refund my order"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Say(ctx, run.ID, "card", ""); !errors.Is(err, client.ErrNotWaiting) {
		t.Errorf("a reply before the run asked: %v, want ErrNotWaiting", err)
	}
	ts.work()
	if got, err := c.GetRun(ctx, run.ID); err != nil || got.Status != client.StatusWaitingInput {
		t.Fatalf("run %s, %v; want waiting_input", got.Status, err)
	}
	reply, err := c.Say(ctx, run.ID, "card", "")
	if err != nil || reply.Repeated || reply.Question != "Card or store credit?" || reply.IdempotencyKey == "" {
		t.Fatalf("say: %+v, %v", reply, err)
	}
	again, err := c.Say(ctx, run.ID, "card", reply.IdempotencyKey)
	if err != nil || !again.Repeated || again.WaitID != reply.WaitID {
		t.Errorf("the reply again under its key: %+v, %v", again, err)
	}
	if _, err := c.Say(ctx, run.ID, "store credit", reply.IdempotencyKey); !errors.Is(err, client.ErrIdempotencyKeyReused) {
		t.Errorf("the key with another text: %v", err)
	}
	ts.work()
	if got, err := c.GetRun(ctx, run.ID); err != nil || got.Status != client.StatusDone || got.Final != "Refunded as card." {
		t.Errorf("run %s with %q, %v; want done with the card", got.Status, got.Final, err)
	}
	if _, err := c.Say(ctx, "run_nope", "card", ""); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("a reply to no run: %v", err)
	}
}

// settlingAgent waits for the payment to settle, then says what the event
// said.
func settlingAgent() *belay.Agent {
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		for _, b := range req.Messages[len(req.Messages)-1].Content {
			if b.Type == model.TypeToolResult {
				return scripted.Reply{Text: "event: " + b.Content}, nil
			}
		}
		return scripted.Reply{Text: "Waiting.", Calls: []scripted.Call{{Name: belay.WaitForEventTool,
			Args: map[string]string{"name": "payment_settled"}}}}, nil
	})
	return &belay.Agent{Name: "settle", Version: "v1", Model: m, Events: &belay.Events{Timeout: time.Hour}}
}

func TestSendEvent(t *testing.T) {
	t.Parallel()
	ts := newServer(t)
	ctx := t.Context()
	c := newClient(t, ts, ts.key("ops", store.RoleOperator))
	run, err := c.CreateRun(ctx, client.RunRequest{Agent: "settle", User: "ada", Input: "refund when paid"})
	if err != nil {
		t.Fatal(err)
	}
	// Sent before the run waits: kept, then taken by the wait.
	sent, err := c.SendEvent(ctx, run.ID, "payment_settled", map[string]int{"amount": 288}, "")
	if err != nil || sent.WaitID != "" || sent.IdempotencyKey == "" {
		t.Fatalf("an early event: %+v, %v", sent, err)
	}
	again, err := c.SendEvent(ctx, run.ID, "payment_settled", map[string]int{"amount": 288}, sent.IdempotencyKey)
	if err != nil || !again.Repeated || again.ID != sent.ID {
		t.Errorf("the event again under its key: %+v, %v", again, err)
	}
	ts.work()
	if got, err := c.GetRun(ctx, run.ID); err != nil || got.Status != client.StatusDone || got.Final != `event: {"amount":288}` {
		t.Errorf("run %s with %q, %v; want done with the event", got.Status, got.Final, err)
	}
	if _, err := c.SendEvent(ctx, run.ID, "payment_settled", nil, ""); !errors.Is(err, client.ErrNotWaiting) {
		t.Errorf("an event to an ended run: %v", err)
	}
	if _, err := c.SendEvent(ctx, run.ID, "has spaces", nil, ""); !errors.Is(err, client.ErrInvalidField) {
		t.Errorf("an event without a valid name: %v", err)
	}
}

// deskAgent asks an approver whether to make an exception, then says the
// answer.
func deskAgent() *belay.Agent {
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		for _, b := range req.Messages[len(req.Messages)-1].Content {
			if b.Type == model.TypeToolResult {
				return scripted.Reply{Text: "answer: " + b.Content}, nil
			}
		}
		return scripted.Reply{Text: "Asking.", Calls: []scripted.Call{{Name: belay.AskPersonTool,
			Args: map[string]any{"question": "Make an exception?", "choices": []string{"yes", "no"}}}}}, nil
	})
	return &belay.Agent{Name: "desk", Version: "v1", Model: m, People: &belay.People{}}
}

func TestPostResult(t *testing.T) {
	t.Parallel()
	ts := newServer(t)
	ctx := t.Context()
	ops := newClient(t, ts, ts.key("ops", store.RoleOperator))
	maya := newClient(t, ts, ts.key("maya", store.RoleApprover))
	run, err := ops.CreateRun(ctx, client.RunRequest{Agent: "desk", User: "ada", Input: "exception?"})
	if err != nil {
		t.Fatal(err)
	}
	ts.work()
	waits, err := ts.st.Waits(ctx, store.ListWaitsParams{RunID: run.ID})
	if err != nil || len(waits) != 1 {
		t.Fatalf("waits %+v, %v", waits, err)
	}
	call := waits[0].ToolUseID
	// The approver finds the question through Waits; the operator, who may
	// not answer it, does not.
	var listed []client.PendingWait
	for w, err := range maya.Waits(ctx, client.WaitFilter{Kind: "person", PageSize: 1}) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, w)
	}
	if len(listed) != 1 || listed[0].CallID != call || listed[0].Question != "Make an exception?" || listed[0].Binding != waits[0].Binding ||
		listed[0].Role != "approver" || len(listed[0].Choices) != 2 {
		t.Errorf("the approver's waits: %+v", listed)
	}
	for w, err := range ops.Waits(ctx, client.WaitFilter{}) {
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("an operator is shown %+v", w)
	}
	if _, err := ops.PostResult(ctx, run.ID, call, client.ResultRequest{Result: "yes"}); !errors.Is(err, client.ErrForbidden) {
		t.Errorf("an operator answering an approver's question: %v", err)
	}
	if _, err := maya.PostResult(ctx, run.ID, call, client.ResultRequest{Result: "maybe"}); !errors.Is(err, client.ErrInvalidField) {
		t.Errorf("an answer not among the choices: %v", err)
	}
	answered, err := maya.PostResult(ctx, run.ID, call, client.ResultRequest{Result: "yes", Binding: waits[0].Binding})
	if err != nil || answered.Kind != "person" || answered.Repeated {
		t.Fatalf("the answer: %+v, %v", answered, err)
	}
	ts.work()
	if got, err := ops.GetRun(ctx, run.ID); err != nil || got.Final != "answer: yes" {
		t.Errorf("run %s with %q, %v", got.Status, got.Final, err)
	}
}
