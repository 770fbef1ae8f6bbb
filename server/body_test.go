package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/belayrun/belay/store"
)

// TestFieldNamesMatchExactly sends every route that takes JSON a field
// under another case, the same field twice, and both spellings at once:
// encoding/json would take "Decision" for "decision", and of two values the
// last, so {"decision":"reject", ..., "Decision":"approve"} approved.
func TestFieldNamesMatchExactly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya", store.RoleApprover)
	admin := f.key("acme", "root", store.RoleAdmin)
	run, a := f.approvalFlow(op, approver)
	b := `"binding":"` + a.Binding + `"`
	keysBefore, err := f.st.APIKeys(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name, method, path, key, body string
		want                          string // in the message
	}{
		{"decision: the attack", "POST", "/v1/approvals/" + a.ID + "/decision", approver,
			`{"decision":"reject","note":"not a duplicate",` + b + `,"Decision":"approve"}`, `unknown field "Decision"`},
		{"decision: a case variant alone", "POST", "/v1/approvals/" + a.ID + "/decision", approver,
			`{"Decision":"approve",` + b + `}`, `unknown field "Decision"`},
		{"decision: twice", "POST", "/v1/approvals/" + a.ID + "/decision", approver,
			`{"decision":"reject","note":"no",` + b + `,"decision":"approve"}`, `"decision" appears twice`},
		{"decision: twice in the edited arguments", "POST", "/v1/approvals/" + a.ID + "/decision", approver,
			`{"decision":"edit",` + b + `,"arguments":{"invoice_id":"INV-2026-004512","amount_usd":1,"reason":"r","amount_usd":288}}`,
			`"amount_usd" appears twice`},
		{"decision: upper case", "POST", "/v1/approvals/" + a.ID + "/decision", approver,
			`{"DECISION":"approve","BINDING":"` + a.Binding + `"}`, `unknown field "DECISION"`},
		{"runs: a case variant alone", "POST", "/v1/runs", op,
			`{"Agent":"support","user":"u-9","input":"hello"}`, `unknown field "Agent"`},
		{"runs: both", "POST", "/v1/runs", op,
			`{"agent":"support","user":"u-9","input":"hello","Input":"refund everything"}`, `unknown field "Input"`},
		{"runs: twice", "POST", "/v1/runs", op,
			`{"agent":"support","user":"u-9","input":"hello","input":"refund everything"}`, `"input" appears twice`},
		{"cancel: a case variant", "POST", "/v1/runs/" + run.ID + "/cancel", op,
			`{"Note":"gone"}`, `unknown field "Note"`},
		{"cancel: twice", "POST", "/v1/runs/" + run.ID + "/cancel", op,
			`{"note":"a","note":"b"}`, `"note" appears twice`},
		{"killswitch: both", "PUT", "/v1/killswitch", admin,
			`{"engaged":false,"reason":"storm","Engaged":true}`, `unknown field "Engaged"`},
		{"killswitch: twice", "PUT", "/v1/killswitch", admin,
			`{"engaged":false,"reason":"storm","engaged":true}`, `"engaged" appears twice`},
		{"keys: both", "POST", "/v1/keys", admin,
			`{"name":"intern","roles":["operator"],"Roles":["admin"]}`, `unknown field "Roles"`},
		{"keys: twice", "POST", "/v1/keys", admin,
			`{"name":"intern","roles":["operator"],"roles":["admin"]}`, `"roles" appears twice`},
		{"webhooks: a case variant", "POST", "/v1/webhooks", admin,
			`{"URL":"https://example.com/hook"}`, `unknown field "URL"`},
		{"webhooks: twice", "POST", "/v1/webhooks", admin,
			`{"url":"https://example.com/a","url":"https://example.com/b"}`, `"url" appears twice`},
	}
	for _, c := range cases {
		res := f.do(c.method, c.path, c.key, c.body, "Idempotency-Key", "exact-1")
		if res.status != http.StatusBadRequest || res.code(t) != "invalid_body" || !strings.Contains(res.message(t), c.want) {
			t.Errorf("%s: %d %s, want 400 invalid_body saying %s", c.name, res.status, res.body, c.want)
		}
	}

	// Nothing was decided, started, cancelled, engaged or created.
	if got := f.pending(approver); len(got) != 1 || got[0].Status != store.ApprovalPending {
		t.Errorf("the approval after the refused bodies: %+v", got)
	}
	runs, err := f.st.ListRuns(context.Background(), store.ListRunsParams{Tenant: "acme", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Status != store.StatusWaitingApproval {
		t.Errorf("runs after the refused bodies: %+v", runs)
	}
	if engaged, _, err := f.st.KillSwitch(context.Background(), "acme"); err != nil || engaged {
		t.Errorf("kill switch engaged %v, %v", engaged, err)
	}
	if keys, err := f.st.APIKeys(context.Background(), "acme"); err != nil || len(keys) != len(keysBefore) {
		t.Errorf("%d keys, want %d (%v)", len(keys), len(keysBefore), err)
	}
	if hooks, err := f.st.Webhooks(context.Background(), "acme"); err != nil || len(hooks) != 0 {
		t.Errorf("webhooks %+v, %v", hooks, err)
	}

	// The exact names still work.
	res := f.do("POST", "/v1/approvals/"+a.ID+"/decision", approver, `{"decision":"reject","note":"not a duplicate",`+b+`}`)
	var decided approvalView
	res.json(t, &decided)
	if res.status != http.StatusOK || decided.Status != store.ApprovalRejected {
		t.Errorf("the exact body: %d %s", res.status, res.body)
	}
}
