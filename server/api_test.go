package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/belayrun/belay/store"
)

func TestCreateRunIdempotencyKeys(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		acme := f.key("acme", "ops", store.RoleOperator)
		globex := f.key("globex", "ops", store.RoleOperator)
		body := map[string]any{"agent": "support", "user": "u-1", "input": demoInput}

		if res := f.do("POST", "/v1/runs", acme, body); res.status != 400 || res.code(t) != "idempotency_key_required" {
			t.Errorf("no key: %d %s", res.status, res.body)
		}
		if res := f.do("POST", "/v1/runs", acme, body, "Idempotency-Key", "has spaces in it"); res.status != 400 || res.code(t) != "idempotency_key_malformed" {
			t.Errorf("malformed key: %d %s", res.status, res.body)
		}
		if res := f.do("POST", "/v1/runs", acme, body, "Idempotency-Key", strings.Repeat("k", 201)); res.status != 400 {
			t.Errorf("a key too long: %d", res.status)
		}

		first := f.do("POST", "/v1/runs", acme, body, "Idempotency-Key", "order-1")
		if first.status != http.StatusCreated {
			t.Fatalf("create: %d %s", first.status, first.body)
		}
		var run runView
		first.json(t, &run)
		if run.ID == "" || run.Status != store.StatusQueued || run.RequestedBy != "human:ops" || first.header.Get("Location") != "/v1/runs/"+run.ID {
			t.Errorf("created %+v, Location %q", run, first.header.Get("Location"))
		}

		again := f.do("POST", "/v1/runs", acme, body, "Idempotency-Key", "order-1")
		var same runView
		again.json(t, &same)
		if again.status != http.StatusOK || same.ID != run.ID || again.header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("repeat: %d, run %s (want %s), replayed %q", again.status, same.ID, run.ID, again.header.Get("Idempotent-Replayed"))
		}

		other := map[string]any{"agent": "support", "user": "u-1", "input": "a different question"}
		if res := f.do("POST", "/v1/runs", acme, other, "Idempotency-Key", "order-1"); res.status != 422 || res.code(t) != "idempotency_key_reused" {
			t.Errorf("same key, other body: %d %s", res.status, res.body)
		}

		// The key is scoped by user and by tenant.
		otherUser := map[string]any{"agent": "support", "user": "u-2", "input": demoInput}
		var u2 runView
		if res := f.do("POST", "/v1/runs", acme, otherUser, "Idempotency-Key", "order-1"); res.status != 201 {
			t.Errorf("same key, another user: %d", res.status)
		} else if res.json(t, &u2); u2.ID == run.ID {
			t.Error("another user got the first user's run")
		}
		var g runView
		res := f.do("POST", "/v1/runs", globex, body, "Idempotency-Key", "order-1")
		res.json(t, &g)
		if res.status != 201 || g.ID == run.ID {
			t.Errorf("same key in another tenant: %d, run %s", res.status, g.ID)
		}
		if res := f.do("GET", "/v1/runs/"+run.ID, globex, nil); res.status != 404 {
			t.Errorf("globex reads acme's run: %d", res.status)
		}
	})
}

func TestCreateRunInFlight(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	acme := f.key("acme", "ops", store.RoleOperator)
	body := map[string]any{"agent": "support", "user": "u-1", "input": demoInput}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	f.srv.beforeCreate = func() {
		once.Do(func() {
			close(entered)
			<-release
		})
	}
	done := make(chan response)
	go func() { done <- f.do("POST", "/v1/runs", acme, body, "Idempotency-Key", "slow-1") }()
	<-entered
	if res := f.do("POST", "/v1/runs", acme, body, "Idempotency-Key", "slow-1"); res.status != 409 || res.code(t) != "request_in_flight" {
		t.Errorf("while the first is in flight: %d %s", res.status, res.body)
	}
	close(release)
	if res := <-done; res.status != 201 {
		t.Errorf("the first request: %d %s", res.status, res.body)
	}
	if res := f.do("POST", "/v1/runs", acme, body, "Idempotency-Key", "slow-1"); res.status != 200 {
		t.Errorf("after the first finished: %d", res.status)
	}
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		approver := f.key("acme", "maya", store.RoleApprover)
		operator := f.key("acme", "ops", store.RoleOperator)
		admin := f.key("acme", "root", store.RoleAdmin)
		body := map[string]any{"agent": "support", "user": "u-1", "input": demoInput}
		cases := []struct {
			name, method, path, key string
			want                    int
			code                    string
		}{
			{"no key", "GET", "/v1/runs", "", 401, "unauthenticated"},
			{"not a key", "GET", "/v1/runs", "hunter2", 401, "unauthenticated"},
			{"unknown key", "GET", "/v1/runs", "belay_k0000000000000000_" + strings.Repeat("0", 64), 401, "unauthenticated"},
			{"wrong secret", "GET", "/v1/runs", operator[:len(operator)-4] + "0000", 401, "unauthenticated"},
			{"approver starts a run", "POST", "/v1/runs", approver, 403, "forbidden"},
			{"operator lists approvals", "GET", "/v1/approvals", operator, 403, "forbidden"},
			{"operator engages the kill switch", "PUT", "/v1/killswitch", operator, 403, "forbidden"},
			{"admin reads runs", "GET", "/v1/runs", admin, 403, "forbidden"},
			{"operator creates a key", "POST", "/v1/keys", operator, 403, "forbidden"},
		}
		for _, c := range cases {
			res := f.do(c.method, c.path, c.key, body, "Idempotency-Key", "k-1")
			if res.status != c.want || res.code(t) != c.code {
				t.Errorf("%s: %d %s, want %d %s", c.name, res.status, res.body, c.want, c.code)
			}
		}
		// A revoked key stops working at once.
		res := f.do("POST", "/v1/keys", admin, map[string]any{"name": "temp", "roles": []string{"operator"}})
		var created keyView
		res.json(t, &created)
		if res.status != 201 || !strings.HasPrefix(created.Key, "belay_"+created.ID+"_") {
			t.Fatalf("create key: %d %s", res.status, res.body)
		}
		if res := f.do("GET", "/v1/runs", created.Key, nil); res.status != 200 {
			t.Fatalf("the new key: %d", res.status)
		}
		if res := f.do("POST", "/v1/keys/"+created.ID+"/revoke", admin, nil); res.status != 200 {
			t.Fatalf("revoke: %d %s", res.status, res.body)
		}
		if res := f.do("GET", "/v1/runs", created.Key, nil); res.status != 401 {
			t.Errorf("a revoked key: %d", res.status)
		}
		list := f.do("GET", "/v1/keys", admin, nil)
		if list.status != 200 || bytes.Contains(list.body, []byte(created.Key)) || bytes.Contains(list.body, []byte("secret")) {
			t.Errorf("key list shows secrets or failed: %d %s", list.status, list.body)
		}
		// Another tenant's admin cannot revoke it.
		other := f.key("globex", "root", store.RoleAdmin)
		if res := f.do("POST", "/v1/keys/"+created.ID+"/revoke", other, nil); res.status != 404 {
			t.Errorf("globex revokes acme's key: %d", res.status)
		}
	})
}

func TestRequestValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	cases := []struct {
		name string
		body string
		ct   string
		want int
		code string
	}{
		{"unknown field", `{"agent":"support","user":"u","input":"x","urgency":1}`, "application/json", 400, "invalid_body"},
		{"not JSON", `{"agent":`, "application/json", 400, "invalid_body"},
		{"trailing data", `{"agent":"support","user":"u","input":"x"} {}`, "application/json", 400, "invalid_body"},
		{"empty", ``, "application/json", 400, "invalid_body"},
		{"wrong type", `{"agent":1,"user":"u","input":"x"}`, "application/json", 400, "invalid_body"},
		{"form body", `agent=support`, "application/x-www-form-urlencoded", 415, "unsupported_media_type"},
		{"no user", `{"agent":"support","input":"x"}`, "application/json", 400, "invalid_field"},
		{"no input", `{"agent":"support","user":"u","input":"  "}`, "application/json", 400, "invalid_field"},
		{"unknown agent", `{"agent":"nope","user":"u","input":"x"}`, "application/json", 422, "unknown_agent"},
		{"too large", `{"agent":"support","user":"u","input":"` + strings.Repeat("x", 2<<20) + `"}`, "application/json", 413, "body_too_large"},
	}
	for _, c := range cases {
		res := f.do("POST", "/v1/runs", op, []byte(c.body), "Idempotency-Key", "v-1", "Content-Type", c.ct)
		if res.status != c.want || res.code(t) != c.code {
			t.Errorf("%s: %d %s, want %d %s", c.name, res.status, clipBody(res.body), c.want, c.code)
		}
		if bytes.Contains(res.body, []byte("goroutine")) || bytes.Contains(res.body, []byte(".go:")) {
			t.Errorf("%s: the error shows internals: %s", c.name, res.body)
		}
	}
	for _, q := range []string{"status=finished", "limit=0", "limit=abc", "since=yesterday", "colour=red"} {
		if res := f.do("GET", "/v1/runs?"+q, op, nil); res.status != 400 || res.code(t) != "invalid_query" {
			t.Errorf("GET /v1/runs?%s: %d %s", q, res.status, res.body)
		}
	}
	if res := f.do("GET", "/v1/nothing", op, nil); res.status != 404 || res.code(t) != "not_found" {
		t.Errorf("unknown endpoint: %d %s", res.status, res.body)
	}
}

func clipBody(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

func TestListRunsFiltersAndPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	var ids []string
	for i, idem := range []string{"a", "b", "c"} {
		run := f.start(op, idem, "support", "u-"+idem, demoInput+strings.Repeat(" ", i))
		ids = append(ids, run.ID)
	}
	f.start(f.key("globex", "ops", store.RoleOperator), "a", "support", "u-a", demoInput)
	var page struct {
		Runs []runView `json:"runs"`
		Next string    `json:"next"`
	}
	f.do("GET", "/v1/runs?limit=2", op, nil).json(t, &page)
	if len(page.Runs) != 2 || page.Runs[0].ID != ids[0] || page.Runs[1].ID != ids[1] || page.Next == "" {
		t.Fatalf("first page: %+v", page)
	}
	next := page.Next
	page.Next = ""
	f.do("GET", next, op, nil).json(t, &page)
	if len(page.Runs) != 1 || page.Runs[0].ID != ids[2] || page.Next != "" {
		t.Errorf("second page (%s): %+v", next, page)
	}
	f.do("GET", "/v1/runs?status=queued&agent=support&since=2020-01-01T00:00:00Z", op, nil).json(t, &page)
	if len(page.Runs) != 3 {
		t.Errorf("filtered: %d runs, want acme's 3", len(page.Runs))
	}
	f.do("GET", "/v1/runs?order=newest&limit=1", op, nil).json(t, &page)
	if len(page.Runs) != 1 || page.Runs[0].ID != ids[2] {
		t.Errorf("newest first: %+v", page.Runs)
	}
	f.do("GET", "/v1/runs?status=done", op, nil).json(t, &page)
	if len(page.Runs) != 0 {
		t.Errorf("status=done: %d runs", len(page.Runs))
	}
}

// approvalFlow starts the double-charge run and drains it to its approval.
func (f *fixture) approvalFlow(op, approver string) (runView, approvalView) {
	f.t.Helper()
	run := f.start(op, "T-1001", "support", "ada", demoInput)
	f.drain()
	pending := f.pending(approver)
	if len(pending) != 1 {
		f.t.Fatalf("%d pending approvals, want the refund's", len(pending))
	}
	return run, pending[0]
}

func TestDecisionFlow(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		op := f.key("acme", "ops", store.RoleOperator)
		approver := f.key("acme", "maya@example.com", store.RoleApprover)
		run, a := f.approvalFlow(op, approver)
		if !strings.HasPrefix(a.Summary, "Refund 288.00 USD on invoice INV-2026-004512") || a.Tool != "issue_refund" || a.Binding == "" || a.Reason == "" {
			t.Fatalf("approval %+v", a)
		}
		path := "/v1/approvals/" + a.ID + "/decision"
		before := len(f.events(run.ID))

		for _, c := range []struct {
			name string
			body map[string]any
			want int
			code string
		}{
			{"no binding", map[string]any{"decision": "approve"}, 400, "invalid_field"},
			{"unknown verdict", map[string]any{"decision": "maybe", "binding": a.Binding}, 400, "invalid_field"},
			{"reject without a note", map[string]any{"decision": "reject", "binding": a.Binding}, 400, "invalid_field"},
			{"edit without arguments", map[string]any{"decision": "edit", "binding": a.Binding}, 400, "invalid_field"},
			{"approve with arguments", map[string]any{"decision": "approve", "binding": a.Binding, "arguments": map[string]any{"amount_usd": 1}}, 400, "invalid_field"},
			{"tampered binding", map[string]any{"decision": "approve", "binding": strings.Repeat("0", len(a.Binding))}, 409, "binding_mismatch"},
			{"edit that breaks the schema", map[string]any{"decision": "edit", "binding": a.Binding, "arguments": map[string]any{"amount_usd": "lots"}}, 422, "invalid_arguments"},
		} {
			res := f.do("POST", path, approver, c.body)
			if res.status != c.want || res.code(t) != c.code {
				t.Errorf("%s: %d %s, want %d %s", c.name, res.status, res.body, c.want, c.code)
			}
		}
		if got := f.pending(approver); len(got) != 1 || got[0].Status != store.ApprovalPending {
			t.Fatalf("refused decisions changed the approval: %+v", got)
		}
		if after := len(f.events(run.ID)); after != before {
			t.Errorf("refused decisions wrote %d events", after-before)
		}

		res := f.do("POST", path, approver, map[string]any{"decision": "approve", "binding": a.Binding, "note": "matches the duplicate charge"})
		var decided approvalView
		res.json(t, &decided)
		if res.status != 200 || decided.Status != store.ApprovalApproved || decided.DecidedBy != "human:maya@example.com" {
			t.Fatalf("approve: %d %s", res.status, res.body)
		}
		// A replay of the same decision does nothing.
		if res := f.do("POST", path, approver, map[string]any{"decision": "approve", "binding": a.Binding}); res.status != 409 || res.code(t) != "already_decided" {
			t.Errorf("replayed decision: %d %s", res.status, res.body)
		}
		f.drain()

		var got runView
		f.do("GET", "/v1/runs/"+run.ID, op, nil).json(t, &got)
		if got.Status != store.StatusDone || got.Final == "" || got.CostUSD <= 0 {
			t.Errorf("after approval: %+v", got)
		}
		var effects struct {
			Effects []effectView `json:"effects"`
		}
		f.do("GET", "/v1/runs/"+run.ID+"/effects", op, nil).json(t, &effects)
		refunds := 0
		for _, e := range effects.Effects {
			if e.Tool == "issue_refund" && e.State == store.EffectDone {
				refunds++
			}
		}
		if refunds != 1 {
			t.Errorf("%d refunds in the effects: %+v", refunds, effects.Effects)
		}

		trace := f.do("GET", "/v1/runs/"+run.ID+"/trace", op, nil)
		if trace.status != 200 || trace.header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("trace: %d %s", trace.status, trace.header.Get("Content-Type"))
		}
		sc := bufio.NewScanner(bytes.NewReader(trace.body))
		lines, decisions := 0, 0
		for sc.Scan() {
			var ev map[string]any
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
				t.Fatalf("trace line %d is not JSON: %s", lines+1, sc.Bytes())
			}
			if ev["run_id"] != run.ID || ev["type"] == nil || ev["ts"] == nil {
				t.Errorf("trace line %d lacks its envelope: %s", lines+1, sc.Bytes())
			}
			if ev["type"] == "approval_decided" && ev["by"] == "human:maya@example.com" {
				decisions++
			}
			lines++
		}
		if lines < 10 || decisions != 1 {
			t.Errorf("trace: %d lines, %d decisions by maya", lines, decisions)
		}
		var msgs struct {
			Messages []messageView `json:"messages"`
		}
		f.do("GET", "/v1/runs/"+run.ID+"/messages", op, nil).json(t, &msgs)
		if len(msgs.Messages) < 4 {
			t.Errorf("%d messages", len(msgs.Messages))
		}

		var stats struct {
			Categories []struct {
				Category string `json:"category"`
				Approved int    `json:"approved"`
			} `json:"categories"`
		}
		f.do("GET", "/v1/stats/approvals", approver, nil).json(t, &stats)
		if len(stats.Categories) != 1 || stats.Categories[0].Approved != 1 {
			t.Errorf("stats %+v", stats)
		}
	})
}

func TestRequesterCannotApproveOwnRun(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		both := f.key("acme", "sam", store.RoleOperator, store.RoleApprover)
		_, a := f.approvalFlow(both, both)
		res := f.do("POST", "/v1/approvals/"+a.ID+"/decision", both, map[string]any{"decision": "approve", "binding": a.Binding})
		if res.status != 403 || res.code(t) != "self_approval" {
			t.Errorf("self-approval: %d %s", res.status, res.body)
		}
		if got := f.pending(both); len(got) != 1 {
			t.Errorf("the refused self-approval decided: %+v", got)
		}
		other := f.key("acme", "maya", store.RoleApprover)
		if res := f.do("POST", "/v1/approvals/"+a.ID+"/decision", other, map[string]any{"decision": "approve", "binding": a.Binding}); res.status != 200 {
			t.Errorf("another approver: %d %s", res.status, res.body)
		}
	})
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		// Tenant B has a run waiting for approval, with effects and a trace.
		bOp := f.key("globex", "ops", store.RoleOperator)
		bApprover := f.key("globex", "bea", store.RoleApprover)
		bRun, bApproval := f.approvalFlow(bOp, bApprover)
		aOp := f.key("acme", "ops", store.RoleOperator)
		aApprover := f.key("acme", "maya", store.RoleApprover)
		aAdmin := f.key("acme", "root", store.RoleAdmin)

		for _, c := range []struct{ method, path, key string }{
			{"GET", "/v1/runs/" + bRun.ID, aOp},
			{"GET", "/v1/runs/" + bRun.ID + "/trace", aOp},
			{"GET", "/v1/runs/" + bRun.ID + "/effects", aOp},
			{"GET", "/v1/runs/" + bRun.ID + "/messages", aOp},
			{"POST", "/v1/runs/" + bRun.ID + "/cancel", aOp},
			{"GET", "/v1/approvals/" + bApproval.ID, aApprover},
			{"POST", "/v1/approvals/" + bApproval.ID + "/decision", aApprover},
		} {
			var body any
			if c.method == "POST" {
				body = map[string]any{"decision": "approve", "binding": bApproval.Binding}
				if strings.HasSuffix(c.path, "/cancel") {
					body = map[string]any{"note": "x"}
				}
			}
			res := f.do(c.method, c.path, c.key, body)
			if res.status != 404 || res.code(t) != "not_found" {
				t.Errorf("%s %s from acme: %d %s, want 404", c.method, c.path, res.status, res.body)
			}
			if bytes.Contains(res.body, []byte(bRun.ID)) || bytes.Contains(res.body, []byte("globex")) {
				t.Errorf("%s %s: the error names the other tenant's data: %s", c.method, c.path, res.body)
			}
		}
		// Lists show nothing of B.
		for _, c := range []struct{ path, key string }{
			{"/v1/runs", aOp}, {"/v1/approvals", aApprover}, {"/v1/approvals?status=pending", aApprover},
			{"/v1/stats/approvals", aApprover}, {"/v1/webhooks", aAdmin}, {"/v1/keys", aAdmin},
		} {
			res := f.do("GET", c.path, c.key, nil)
			if res.status != 200 || bytes.Contains(res.body, []byte(bRun.ID)) || bytes.Contains(res.body, []byte(bApproval.ID)) ||
				bytes.Contains(res.body, []byte("globex")) || bytes.Contains(res.body, []byte(`"bea"`)) {
				t.Errorf("GET %s from acme: %d %s", c.path, res.status, res.body)
			}
		}
		// An approver of another tenant cannot decide; B's approval is untouched.
		if got := f.pending(bApprover); len(got) != 1 || got[0].Status != store.ApprovalPending {
			t.Errorf("B's approval after acme's attempts: %+v", got)
		}
		var run runView
		f.do("GET", "/v1/runs/"+bRun.ID, bOp, nil).json(t, &run)
		if run.Status != store.StatusWaitingApproval {
			t.Errorf("B's run is %s after acme's attempts", run.Status)
		}
	})
}

func TestCancelRun(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		op := f.key("acme", "ops", store.RoleOperator)
		approver := f.key("acme", "maya", store.RoleApprover)
		run, a := f.approvalFlow(op, approver)
		res := f.do("POST", "/v1/runs/"+run.ID+"/cancel", op, map[string]any{"note": "customer withdrew"})
		var got runView
		res.json(t, &got)
		if res.status != 200 || got.Status != store.StatusCanceled {
			t.Fatalf("cancel: %d %s", res.status, res.body)
		}
		if res := f.do("POST", "/v1/runs/"+run.ID+"/cancel", op, nil); res.status != 409 || res.code(t) != "wrong_status" {
			t.Errorf("cancel twice: %d %s", res.status, res.body)
		}
		if res := f.do("POST", "/v1/approvals/"+a.ID+"/decision", approver, map[string]any{"decision": "approve", "binding": a.Binding}); res.status != 409 {
			t.Errorf("deciding an approval of a canceled run: %d %s", res.status, res.body)
		}
		f.drain()
		refunds, err := f.world.RefundsOf(t.Context(), "CH-2")
		if err != nil {
			t.Fatal(err)
		}
		if len(refunds) != 0 {
			t.Errorf("a canceled run refunded: %+v", refunds)
		}
	})
}

func TestKillSwitchAPI(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	admin := f.key("acme", "root", store.RoleAdmin)
	if res := f.do("PUT", "/v1/killswitch", admin, map[string]any{"engaged": true}); res.status != 400 {
		t.Errorf("engage without a reason: %d", res.status)
	}
	res := f.do("PUT", "/v1/killswitch", admin, map[string]any{"engaged": true, "reason": "refund storm"})
	var ks killSwitchView
	res.json(t, &ks)
	if res.status != 200 || !ks.Engaged || !strings.Contains(ks.Reason, "refund storm") {
		t.Fatalf("engage: %d %s", res.status, res.body)
	}
	other := f.key("globex", "root", store.RoleAdmin)
	f.do("GET", "/v1/killswitch", other, nil).json(t, &ks)
	if ks.Engaged {
		t.Error("acme's switch stopped globex")
	}
	f.do("PUT", "/v1/killswitch", admin, map[string]any{"engaged": false}).json(t, &ks)
	if ks.Engaged {
		t.Error("release did not release")
	}
}

func TestWebhooksAPI(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	admin := f.key("acme", "root", store.RoleAdmin)
	for _, body := range []map[string]any{
		{"url": "ftp://example.com/hook"},
		{"url": "https://user:pass@example.com/hook"},
		{"url": "https://example.com/hook", "kinds": []string{"everything"}},
	} {
		if res := f.do("POST", "/v1/webhooks", admin, body); res.status != 400 {
			t.Errorf("webhook %v: %d %s", body, res.status, res.body)
		}
	}
	res := f.do("POST", "/v1/webhooks", admin, map[string]any{"url": "https://example.com/hook", "kinds": []string{"approval_requested"}})
	var h webhookView
	res.json(t, &h)
	if res.status != 201 || !strings.HasPrefix(h.Secret, "whsec_") {
		t.Fatalf("create webhook: %d %s", res.status, res.body)
	}
	list := f.do("GET", "/v1/webhooks", admin, nil)
	if list.status != 200 || bytes.Contains(list.body, []byte(h.Secret)) || !bytes.Contains(list.body, []byte(h.ID)) {
		t.Errorf("webhook list: %d %s", list.status, list.body)
	}
	if res := f.do("POST", "/v1/webhooks/"+h.ID+"/disable", f.key("globex", "root", store.RoleAdmin), nil); res.status != 404 {
		t.Errorf("globex disables acme's webhook: %d", res.status)
	}
	if res := f.do("POST", "/v1/webhooks/"+h.ID+"/disable", admin, nil); res.status != 200 {
		t.Errorf("disable: %d %s", res.status, res.body)
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, p := range []string{"/healthz", "/readyz"} {
		if res := f.do("GET", p, "", nil); res.status != 200 {
			t.Errorf("%s: %d", p, res.status)
		}
	}
}
