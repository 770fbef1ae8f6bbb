package server

import (
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

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

// driveSignals drives events sent to a run: refused ones, one kept, one
// that answers the run's wait, its repeat, and one after the run ended.
func (d *driver) driveSignals(op string) {
	t := d.t
	var r runView
	d.expect(apiCall{method: "POST", path: "/v1/runs", key: op, body: map[string]any{"agent": "settle", "user": "ada", "input": "refund when paid"},
		headers: []string{"Idempotency-Key", "S-1"}}, 201, "").json(t, &r)
	signal := func(key string, body any) apiCall {
		c := apiCall{method: "POST", path: "/v1/runs/" + r.ID + "/signals", key: op, body: body}
		if key != "" {
			c.headers = []string{"Idempotency-Key", key}
		}
		return c
	}
	d.expect(signal("", map[string]any{"name": "has spaces"}), 400, "invalid_field")
	d.expect(signal("has spaces", map[string]any{"name": "payment_settled"}), 400, "idempotency_key_malformed")
	// Before the run waits, the event is kept.
	var kept signalView
	d.expect(signal("E-0", map[string]any{"name": "refund_landed", "payload": map[string]any{"id": "RF-1"}}), 200, "").json(t, &kept)
	if kept.WaitID != "" {
		t.Errorf("an event nobody waits for answered %s", kept.WaitID)
	}
	d.f.drain()
	d.expect(apiCall{method: "GET", path: "/v1/runs/" + r.ID, key: op}, 200, "").json(t, &r)
	if r.Status != store.StatusWaitingInput {
		t.Fatalf("the settling run is %s, want waiting_input", r.Status)
	}
	var sent signalView
	d.expect(signal("E-1", map[string]any{"name": "payment_settled", "payload": map[string]any{"amount": 288}}), 200, "").json(t, &sent)
	if sent.WaitID == "" || sent.Repeated {
		t.Errorf("the event the run waits for: %+v", sent)
	}
	again := d.expect(signal(`"E-1"`, map[string]any{"name": "payment_settled", "payload": map[string]any{"amount": 288}}), 200, "")
	if again.header.Get("Idempotent-Replayed") != "true" {
		t.Error("a repeated event does not say so")
	}
	d.expect(signal("E-1", map[string]any{"name": "payment_settled", "payload": map[string]any{"amount": 1}}), 422, "idempotency_key_reused")
	d.f.drain()
	d.expect(apiCall{method: "GET", path: "/v1/runs/" + r.ID, key: op}, 200, "").json(t, &r)
	if r.Status != store.StatusDone || r.Final != `event: {"amount":288}` {
		t.Errorf("after the event the run is %s with %q", r.Status, r.Final)
	}
	d.expect(signal("E-2", map[string]any{"name": "payment_settled"}), 409, "not_waiting")
}
