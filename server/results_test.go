package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// deskAgent asks an approver (or, for a run whose input begins "for
// operators", an operator) whether to make an exception, yes or no (or,
// for an input that begins "free", in words), then says the answer.
func deskAgent() *belay.Agent {
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		for _, b := range req.Messages[len(req.Messages)-1].Content {
			if b.Type == model.TypeToolResult {
				return scripted.Reply{Text: "answer: " + b.Content}, nil
			}
		}
		args := map[string]any{"question": "Make an exception?", "choices": []string{"yes", "no"}}
		// A run asked "for operators" asks the operators instead.
		if first := req.Messages[0].Content; len(first) > 0 && strings.HasPrefix(first[0].Text, "for operators") {
			args["role"] = "operator"
		} else if len(first) > 0 && strings.HasPrefix(first[0].Text, "free") {
			delete(args, "choices")
		}
		return scripted.Reply{Text: "Asking.", Calls: []scripted.Call{{Name: belay.AskPersonTool, Args: args}}}, nil
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
	d.driveWaits(op, approver, id, w)
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

// driveWaits drives the list of what a person can answer: the question
// shows to its role only, filtered and paged, and a bad filter is refused.
func (d *driver) driveWaits(op, approver, runID string, w store.Wait) {
	t := d.t
	var page struct {
		Waits []pendingWaitView `json:"waits"`
		Next  string            `json:"next"`
	}
	d.expect(apiCall{method: "GET", path: "/v1/waits?run=" + runID, key: approver}, 200, "").json(t, &page)
	if len(page.Waits) != 1 || page.Next != "" {
		t.Fatalf("the approver's waits of run %s: %+v", runID, page)
	}
	got := page.Waits[0]
	if got.ID != w.ID || got.CallID != w.ToolUseID || got.Kind != store.WaitPerson || got.Question != "Make an exception?" ||
		strings.Join(got.Choices, ",") != "yes,no" || got.Role != store.RoleApprover || got.Binding != w.Binding ||
		got.Answer != "/v1/runs/"+runID+"/results/"+w.ToolUseID {
		t.Errorf("the question as listed: %+v", got)
	}
	// An operator may not answer an approver's question, so it is not
	// shown one.
	page.Waits = nil
	d.expect(apiCall{method: "GET", path: "/v1/waits?run=" + runID, key: op}, 200, "").json(t, &page)
	if len(page.Waits) != 0 {
		t.Errorf("an operator is shown an approver's question: %+v", page.Waits)
	}
	page.Waits = nil
	d.expect(apiCall{method: "GET", path: "/v1/waits?kind=result&run=" + runID, key: approver}, 200, "").json(t, &page)
	if len(page.Waits) != 0 {
		t.Errorf("kind=result lists a question: %+v", page.Waits)
	}
	d.expect(apiCall{method: "GET", path: "/v1/waits?kind=input", key: approver}, 400, "invalid_query")
	d.expect(apiCall{method: "GET", path: "/v1/waits?status=pending", key: approver}, 400, "invalid_query")
}

// TestWaitsListPagesByRole: the list of what a person can answer shows
// each key the questions of its roles, in order, page after page, none
// twice and none missed; another tenant sees none of them.
func TestWaitsListPagesByRole(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		op := f.key("acme", "ops", store.RoleOperator)
		approver := f.key("acme", "maya", store.RoleApprover)
		both := f.key("acme", "sam", store.RoleOperator, store.RoleApprover)
		var want = map[string][]string{}
		for i, input := range []string{"exception?", "for operators: exception?", "exception?", "for operators: exception?", "exception?"} {
			r := f.start(op, fmt.Sprintf("Q-%d", i), "desk", "ada", input)
			f.drain()
			ws, err := f.st.(store.Waiter).Waits(t.Context(), store.ListWaitsParams{RunID: r.ID})
			if err != nil || len(ws) != 1 {
				t.Fatalf("waits of run %d: %+v, %v", i, ws, err)
			}
			role := "approver"
			if i%2 == 1 {
				role = "operator"
			}
			want[role] = append(want[role], ws[0].ID)
			want["both"] = append(want["both"], ws[0].ID)
		}
		list := func(key string) []string {
			var ids []string
			path := "/v1/waits?limit=1&kind=person"
			for range 10 {
				var page struct {
					Waits []pendingWaitView `json:"waits"`
					Next  string            `json:"next"`
				}
				res := f.do("GET", path, key, nil)
				if res.status != 200 {
					t.Fatalf("GET %s: %d %s", path, res.status, res.body)
				}
				res.json(t, &page)
				for _, w := range page.Waits {
					ids = append(ids, w.ID)
				}
				if page.Next == "" {
					return ids
				}
				path = page.Next
			}
			t.Fatalf("more than 10 pages")
			return nil
		}
		for name, key := range map[string]string{"approver": approver, "operator": op, "both": both} {
			if got := list(key); strings.Join(got, " ") != strings.Join(want[name], " ") {
				t.Errorf("the %s key lists %v, want %v", name, got, want[name])
			}
		}
		if got := list(f.key("globex", "eve", store.RoleOperator, store.RoleApprover)); len(got) != 0 {
			t.Errorf("another tenant lists %v", got)
		}
	})
}
