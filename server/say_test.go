package server

import (
	"context"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// conciergeAgent asks its user how to refund, and says what it did with
// the reply.
func conciergeAgent() *belay.Agent {
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		last := req.Messages[len(req.Messages)-1]
		for _, b := range last.Content {
			if b.Type == model.TypeToolResult {
				return scripted.Reply{Text: "Refunded as " + b.Content + "."}, nil
			}
		}
		return scripted.Reply{Text: "Asking how to refund.", Calls: []scripted.Call{{Name: belay.AskUserTool,
			Args: map[string]string{"question": "Refund to your card or as store credit?"}}}}, nil
	})
	return &belay.Agent{Name: "concierge", Version: "v1", Model: m, Conversation: &belay.Conversation{IdleTimeout: time.Hour}}
}

// driveSay drives the reply to a run that asks its user: refused replies,
// the reply, its repeat, a reply too many, and one too late.
func (d *driver) driveSay(op string) {
	t := d.t
	start := func(key string) string {
		var r runView
		d.expect(apiCall{method: "POST", path: "/v1/runs", key: op, body: map[string]any{"agent": "concierge", "user": "ada", "input": "refund my order"},
			headers: []string{"Idempotency-Key", key}}, 201, "").json(t, &r)
		d.f.drain()
		return r.ID
	}
	id := start("C-1")
	var r runView
	d.expect(apiCall{method: "GET", path: "/v1/runs/" + id, key: op}, 200, "").json(t, &r)
	if r.Status != store.StatusWaitingInput {
		t.Fatalf("the concierge's run is %s, want waiting_input", r.Status)
	}
	say := func(key string, body any) apiCall {
		c := apiCall{method: "POST", path: "/v1/runs/" + id + "/messages", key: op, body: body}
		if key != "" {
			c.headers = []string{"Idempotency-Key", key}
		}
		return c
	}
	d.expect(say("", map[string]any{"text": "  "}), 400, "invalid_field")
	d.expect(say("has spaces", map[string]any{"text": "card"}), 400, "idempotency_key_malformed")
	var said sayView
	d.expect(say("R-1", map[string]any{"text": "card"}), 200, "").json(t, &said)
	if said.Repeated || said.Question != "Refund to your card or as store credit?" || said.AnsweredBy == "" {
		t.Errorf("the reply: %+v", said)
	}
	again := d.expect(say(`"R-1"`, map[string]any{"text": "card"}), 200, "")
	if again.header.Get("Idempotent-Replayed") != "true" {
		t.Error("a repeated reply does not say so")
	}
	d.expect(say("R-1", map[string]any{"text": "store credit"}), 422, "idempotency_key_reused")
	d.expect(say("R-2", map[string]any{"text": "store credit"}), 409, "not_waiting")
	d.f.drain()
	d.expect(apiCall{method: "GET", path: "/v1/runs/" + id, key: op}, 200, "").json(t, &r)
	if r.Status != store.StatusDone || r.Final != "Refunded as card." {
		t.Errorf("after the reply the run is %s with %q", r.Status, r.Final)
	}

	// A reply after the conversation ended idle is refused as such.
	late := start("C-2")
	if _, err := d.f.st.(store.Waiter).ExpireDueWaits(context.Background(), store.ExpireWaitsParams{Now: time.Now().Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	id = late
	d.expect(say("R-3", map[string]any{"text": "card"}), 409, "wait_expired")
}

// TestSayTenantScope: another tenant's reply to a run answers 404, and
// the run still waits.
func TestSayTenantScope(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		acme := f.key("acme", "ops", store.RoleOperator)
		globex := f.key("globex", "ops", store.RoleOperator)
		res := f.do("POST", "/v1/runs", acme, map[string]any{"agent": "concierge", "user": "ada", "input": "refund"}, "Idempotency-Key", "C-1")
		if res.status != 201 {
			t.Fatalf("start: %d %s", res.status, res.body)
		}
		var r runView
		res.json(t, &r)
		f.drain()
		if res := f.do("POST", "/v1/runs/"+r.ID+"/messages", globex, map[string]any{"text": "card"}); res.status != 404 || res.code(t) != "not_found" {
			t.Errorf("another tenant's reply: %d %s", res.status, res.body)
		}
		if got, err := f.st.GetRun(t.Context(), "acme", r.ID); err != nil || got.Status != store.StatusWaitingInput {
			t.Errorf("after another tenant's reply the run is %s (%v), want waiting_input", got.Status, err)
		}
		if res := f.do("POST", "/v1/runs/"+r.ID+"/messages", acme, map[string]any{"text": "card"}); res.status != 200 {
			t.Errorf("the tenant's reply: %d %s", res.status, res.body)
		}
	})
}
