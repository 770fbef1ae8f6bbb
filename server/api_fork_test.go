package server

import (
	"strings"
	"testing"

	"github.com/belayrun/belay/store"
)

// driveFork forks runID, done with its refund approved: a step missing or
// out of range and the other bad fields are refused, a fork at step 0 is
// queued, and its call that would refund again waits for a person, its
// approval naming the parent's effect.
func (d *driver) driveFork(op, approver, runID string) {
	t := d.t
	fork := func(body any) apiCall {
		return apiCall{method: "POST", path: "/v1/runs/" + runID + "/fork", key: op, body: body}
	}
	for _, bad := range []map[string]any{
		{},
		{"at_step": -1},
		{"at_step": 0, "reason": strings.Repeat("r", 2001)},
	} {
		d.expect(fork(bad), 400, "invalid_field")
	}
	d.expect(fork(map[string]any{"at_step": "two"}), 400, "invalid_body")
	var v runView
	d.expect(fork(map[string]any{"at_step": 0, "reason": "replay the ticket"}), 201, "").json(t, &v)
	if v.ID == "" || v.ID == runID || v.Status != store.StatusQueued || v.Steps != 0 || v.RequestedBy == "" {
		t.Fatalf("the fork: %+v", v)
	}
	d.f.drain()
	var list struct {
		Approvals []approvalView `json:"approvals"`
	}
	d.expect(apiCall{method: "GET", path: "/v1/approvals?status=pending&run=" + v.ID, key: approver}, 200, "").json(t, &list)
	if len(list.Approvals) != 1 {
		t.Fatalf("%d pending approvals of the fork, want its refund", len(list.Approvals))
	}
	a := list.Approvals[0]
	if a.Tool != "issue_refund" || a.ParentDid == nil || a.ParentDid.RunID != runID || a.ParentDid.State != "done" {
		t.Errorf("the fork's approval of %s: parent_did %+v, want the parent's refund", a.Tool, a.ParentDid)
	}
}

// TestForkRefusesWhatTheDocumentCannotSay: a step past the run's own and
// append without a message are refused with what to do, and nothing is
// forked.
func TestForkRefusesWhatTheDocumentCannotSay(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	r := f.start(op, "T-1", "support", "ada", demoInput)
	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"at_step": 3}, "at_step must be from 0 to 0"},
		{map[string]any{"at_step": 0, "append": true, "message": "  "}, "append adds message"},
	} {
		res := f.do("POST", "/v1/runs/"+r.ID+"/fork", op, c.body)
		if res.status != 400 || res.code(t) != "invalid_field" || !strings.Contains(string(res.body), c.want) {
			t.Errorf("fork %v: %d %s, want 400 invalid_field saying %q", c.body, res.status, res.body, c.want)
		}
	}
	if runs := f.do("GET", "/v1/runs", op, nil); !strings.Contains(string(runs.body), r.ID) || strings.Count(string(runs.body), `"id"`) != 1 {
		t.Errorf("runs after the refusals: %s", runs.body)
	}
}

// driveMigrations moves runs between versions: none is paused on a
// mismatch here, so nothing moves; bad versions are refused.
func (d *driver) driveMigrations(op string) {
	t := d.t
	call := func(body any) apiCall { return apiCall{method: "POST", path: "/v1/migrations", key: op, body: body} }
	for _, bad := range []map[string]any{{"to": "v2"}, {"from": "v1"}, {"from": "", "to": "v2"}, {"from": "v1", "to": "v2", "batch": 1001}} {
		d.expect(call(bad), 400, "invalid_field")
	}
	var m struct {
		Moved int      `json:"moved"`
		Runs  []string `json:"runs"`
	}
	d.expect(call(map[string]any{"agent": "support", "from": "v0", "to": "v1", "batch": 10}), 200, "").json(t, &m)
	if m.Moved != 0 || m.Runs == nil {
		t.Errorf("a migration with nothing to move: %+v", m)
	}
}

// TestConsoleShowsWhatTheParentDid: a fork's call that repeats its
// parent's refund shows on the console's card as the parent's, with a link
// to the parent; the parent's own card says nothing of the kind.
func TestConsoleShowsWhatTheParentDid(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya", store.RoleApprover)
	parent, a := f.approvalFlow(op, approver)
	c := f.signIn(approver)
	if _, body := get(t, c, f.http.URL+"/console/"); strings.Contains(body, "The parent run did this") {
		t.Fatal("the parent's own card says a parent did it")
	}
	if res := f.do("POST", "/v1/approvals/"+a.ID+"/decision", approver, map[string]any{"decision": "approve", "binding": a.Binding}); res.status != 200 {
		t.Fatalf("approve: %d %s", res.status, res.body)
	}
	f.drain()
	res := f.do("POST", "/v1/runs/"+parent.ID+"/fork", op, map[string]any{"at_step": 2, "reason": "check the refund"})
	if res.status != 201 {
		t.Fatalf("fork: %d %s", res.status, res.body)
	}
	f.drain()
	status, body := get(t, c, f.http.URL+"/console/")
	if status != 200 || !containsAll(body, "The parent run did this", `href="/console/runs/`+parent.ID+`"`, "Approving does it again") {
		t.Errorf("queue with the fork's card: %d\n%s", status, body)
	}
}
