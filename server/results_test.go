package server

import (
	"context"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

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

// driveResults drives a person's answer to a run's question: refused
// answers, the answer, its repeat, one too many, and one too late.
func (d *driver) driveResults(op, approver string) {
	t := d.t
	start := func(key string) (string, store.Wait) {
		var r runView
		d.expect(apiCall{method: "POST", path: "/v1/runs", key: op, body: map[string]any{"agent": "desk", "user": "ada", "input": "exception?"},
			headers: []string{"Idempotency-Key", key}}, 201, "").json(t, &r)
		d.f.drain()
		ws, err := d.f.st.(store.Waiter).Waits(context.Background(), store.ListWaitsParams{RunID: r.ID})
		if err != nil || len(ws) != 1 {
			t.Fatalf("waits of the desk's run: %+v, %v", ws, err)
		}
		return r.ID, ws[0]
	}
	id, w := start("Q-1")
	post := func(key, header string, body any) apiCall {
		c := apiCall{method: "POST", path: "/v1/runs/" + id + "/results/" + w.ToolUseID, key: key, body: body}
		if header != "" {
			c.headers = []string{"Idempotency-Key", header}
		}
		return c
	}
	d.expect(post(approver, "", map[string]any{"result": nil}), 400, "invalid_field")
	maybe := post(approver, "", map[string]any{"result": "maybe"})
	maybe.stateful = "the answer must be one of the question's choices"
	d.expect(maybe, 400, "invalid_field")
	d.expect(post(approver, "has spaces", map[string]any{"result": "yes"}), 400, "idempotency_key_malformed")
	d.expect(post(op, "", map[string]any{"result": "yes"}), 403, "forbidden")
	d.expect(post(approver, "", map[string]any{"result": "yes", "binding": "forged"}), 409, "binding_mismatch")
	var answered resultView
	d.expect(post(approver, "A-1", map[string]any{"result": "yes", "binding": w.Binding}), 200, "").json(t, &answered)
	if answered.Kind != store.WaitPerson || answered.CallID != w.ToolUseID || answered.Repeated {
		t.Errorf("the answer: %+v", answered)
	}
	if again := d.expect(post(approver, `"A-1"`, map[string]any{"result": "yes", "binding": w.Binding}), 200, ""); again.header.Get("Idempotent-Replayed") != "true" {
		t.Error("a repeated answer does not say so")
	}
	d.expect(post(approver, "A-1", map[string]any{"result": "no"}), 422, "idempotency_key_reused")
	d.expect(post(approver, "A-2", map[string]any{"result": "no"}), 409, "not_waiting")
	d.f.drain()
	var r runView
	d.expect(apiCall{method: "GET", path: "/v1/runs/" + id, key: op}, 200, "").json(t, &r)
	if r.Status != store.StatusDone || r.Final != "answer: yes" {
		t.Errorf("after the answer the run is %s with %q", r.Status, r.Final)
	}

	id, w = start("Q-2")
	if _, err := d.f.st.(store.Waiter).ExpireDueWaits(context.Background(), store.ExpireWaitsParams{Now: time.Now().Add(belay.DefaultPersonTimeout + time.Hour)}); err != nil {
		t.Fatal(err)
	}
	d.expect(post(approver, "A-3", map[string]any{"result": "yes"}), 409, "wait_expired")
}
