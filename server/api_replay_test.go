package server

import (
	"net/url"
	"strings"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// driveReplays replays runID, done with its refund approved: bad requests
// are refused with what to do, an agent not served is unknown, and the
// replay on the script the run was recorded with makes the same effects.
func (d *driver) driveReplays(op, runID string) {
	t := d.t
	call := func(body any) apiCall { return apiCall{method: "POST", path: "/v1/replays", key: op, body: body} }
	for _, bad := range []map[string]any{
		{"runs": []string{runID}},
		{"agent": "support", "limit": 51},
		{"agent": "support", "model": "gpt-9"},
	} {
		d.expect(call(bad), 400, "invalid_field")
	}
	d.expect(call(map[string]any{"agent": "nobody"}), 422, "unknown_agent")
	var v replayView
	d.expect(call(map[string]any{"agent": "support", "runs": []string{runID}}), 200, "").json(t, &v)
	if len(v.Runs) != 1 || v.Runs[0].RunID != runID || v.Total.Runs != 1 || v.Model != "primary" {
		t.Fatalf("replay of %s: %+v", runID, v)
	}
	if r := v.Runs[0]; r.Same == 0 || r.Missing != 0 || r.Extra != 0 || r.DifferentArgs != 0 || r.WouldHaveDone != 0 || !r.Verified {
		t.Errorf("the replay on the recorded script: %+v, want every effect the same and verified", r)
	}
}

// A replay through the API executes no side effect and writes nothing to
// the tenant's runs: a run whose refund was rejected is replayed, its
// replay approves the refund in its sandbox and would have made it, and
// the world's refunds, emails and notes are as before. Another tenant's
// run is not found.
func TestReplayRouteExecutesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya", store.RoleApprover)
	run, a := f.approvalFlow(op, approver)
	if res := f.do("POST", "/v1/approvals/"+a.ID+"/decision", approver, map[string]any{"decision": "reject", "binding": a.Binding,
		"note": "not this one"}); res.status != 200 {
		t.Fatalf("reject: %d %s", res.status, res.body)
	}
	f.drain()
	before, err := f.world.Counts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	runsBefore := f.do("GET", "/v1/runs", op, nil).body

	res := f.do("POST", "/v1/replays", op, map[string]any{"agent": "support", "limit": 5})
	if res.status != 200 {
		t.Fatalf("replay: %d %s", res.status, res.body)
	}
	var v replayView
	res.json(t, &v)
	if len(v.Runs) != 1 || v.Runs[0].RunID != run.ID {
		t.Fatalf("replayed %+v, want the one run", v.Runs)
	}
	r := v.Runs[0]
	var refund *belay.ReplayedEffect
	for i, e := range r.Effects {
		if e.Tool == "issue_refund" {
			refund = &r.Effects[i]
		}
	}
	if refund == nil || refund.Comparison != belay.EffectExtra || r.WouldHaveDone == 0 || r.Approvals == 0 || v.Total.Extra != r.Extra {
		t.Fatalf("the replay of a run whose refund was rejected: %+v; want the refund extra, would have done, after an approval", r)
	}
	after, err := f.world.Counts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("the world changed under a replay: %+v, was %+v", after, before)
	}
	if runsAfter := f.do("GET", "/v1/runs", op, nil).body; string(runsAfter) != string(runsBefore) {
		t.Errorf("the tenant's runs changed under a replay:\n%s\nwas\n%s", runsAfter, runsBefore)
	}

	// What the document cannot say: no fallback model, a policy that does
	// not parse, a run of another agent.
	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"agent": "support", "model": "fallback"}, `agent \"support\" has no fallback model; replay it on its primary model`},
		{map[string]any{"agent": "support", "policy": "rules: ["}, "policy: "},
		{map[string]any{"agent": "vault", "runs": []string{run.ID}}, "replay each agent's runs on their own"},
	} {
		res := f.do("POST", "/v1/replays", op, c.body)
		if res.status != 400 || res.code(t) != "invalid_field" || !strings.Contains(string(res.body), c.want) {
			t.Errorf("replay %v: %d %s, want 400 invalid_field saying %q", c.body, res.status, res.body, c.want)
		}
	}

	other := f.key("globex", "ops", store.RoleOperator)
	if res := f.do("POST", "/v1/replays", other, map[string]any{"agent": "support", "runs": []string{run.ID}}); res.status != 404 {
		t.Errorf("another tenant's replay of the run: %d %s", res.status, res.body)
	}
	if res := f.do("POST", "/v1/replays", other, map[string]any{"agent": "support"}); res.status != 200 || !strings.Contains(string(res.body), `"runs":[]`) {
		t.Errorf("another tenant's replay of its own runs: %d %s, want none", res.status, res.body)
	}
}

// The console's replay page shows the comparison for an operator, keeps a
// sensitive argument out of the page, and is refused to a key without the
// operator role.
func TestConsoleReplayPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya", store.RoleApprover)
	run := f.start(op, "vault-1", "vault", "ada", "store my token")
	f.drain()
	before := f.events(run.ID)

	c := f.signIn(op)
	if status, body := get(t, c, f.http.URL+"/console/replay"); status != 200 || !containsAll(body, `<option value="vault"`, `action="/console/replay"`) {
		t.Fatalf("the replay form: %d\n%s", status, body)
	}
	status, _, body := post(t, c, f.http.URL+"/console/replay", url.Values{"agent": {"vault"}, "runs": {run.ID}})
	if status != 200 || !containsAll(body, `data-replayed="`+run.ID+`"`, "<code>save_credential</code> extra", `id="replay-total"`) {
		t.Fatalf("the replay: %d\n%s", status, body)
	}
	if strings.Contains(body, secret) {
		t.Error("the replay page shows the sensitive token")
	}
	if after := f.events(run.ID); len(after) != len(before) {
		t.Errorf("the replay wrote %d events to the recorded run", len(after)-len(before))
	}
	status, _, body = post(t, c, f.http.URL+"/console/replay", url.Values{"agent": {"vault"}, "limit": {"500"}})
	if status != 200 || !strings.Contains(body, "limit is from 1 to 50") {
		t.Errorf("a replay of too many runs: %d\n%s", status, body)
	}
	if status, _ := get(t, f.signIn(approver), f.http.URL+"/console/replay"); status != 403 {
		t.Errorf("the replay page for an approver alone: %d, want 403", status)
	}
}
