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
