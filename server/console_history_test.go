package server

import (
	"strings"
	"testing"

	"github.com/belayrun/belay/store"
)

// approveRun approves the pending approval of a run and drains the runs, so
// that its side effect lands in the ledger.
func (f *fixture) approveRun(approver, runID string) {
	f.t.Helper()
	for _, a := range f.pending(approver) {
		if a.RunID != runID {
			continue
		}
		res := f.do("POST", "/v1/approvals/"+a.ID+"/decision", approver, map[string]any{"decision": "approve", "binding": a.Binding})
		if res.status != 200 {
			f.t.Fatalf("approve %s: %d %s", a.ID, res.status, res.body)
		}
		f.drain()
		return
	}
	f.t.Fatalf("run %s has no pending approval", runID)
}

// The card of a refund shows what Belay already did for the same customer
// in other runs, with secrets redacted as on the run's own effects, and
// nothing of other customers or tenants.
func TestConsoleCardShowsCustomerHistory(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		op := f.key("acme", "ops", store.RoleOperator)
		approver := f.key("acme", "maya", store.RoleApprover)
		c := f.signIn(approver)

		refunded, first := f.approvalFlow(op, approver)
		if _, body := get(t, c, f.http.URL+"/console/approvals/"+first.ID); strings.Contains(body, "Earlier for this customer") {
			t.Errorf("the card of ada's first run shows a history she does not have:\n%s", body)
		}
		f.approveRun(approver, refunded.ID)
		vault := f.start(op, "vault-1", "vault", "ada", "store my token")
		f.drain()
		f.approveRun(approver, vault.ID)
		bob := f.start(op, "T-2001", "support", "bob", demoInput)
		f.drain()
		f.approveRun(approver, bob.ID)
		globexOp := f.key("globex", "ops", store.RoleOperator)
		globex := f.start(globexOp, "vault-1", "vault", "ada", "store my token")
		f.drain()
		f.approveRun(f.key("globex", "bea", store.RoleApprover), globex.ID)

		again := f.start(op, "T-1002", "support", "ada", demoInput)
		f.drain()
		var card approvalView
		for _, a := range f.pending(approver) {
			if a.RunID == again.ID {
				card = a
			}
		}
		if card.ID == "" {
			t.Fatalf("ada's second run has no pending approval")
		}
		_, body := get(t, c, f.http.URL+"/console/approvals/"+card.ID)
		_, history, ok := strings.Cut(body, "Earlier for this customer")
		if !ok {
			t.Fatalf("the card lacks the customer's history:\n%s", body)
		}
		history, _, _ = strings.Cut(history, "</ul>")
		if !containsAll(history, "issue_refund", "Charge id: CH-2", "Amount usd: 288", "/console/runs/"+refunded.ID,
			"save_credential", "Token: [redacted]", "/console/runs/"+vault.ID) {
			t.Errorf("the history lacks ada's refund or her stored token:\n%s", history)
		}
		if strings.Index(history, "save_credential") > strings.Index(history, "issue_refund") {
			t.Errorf("the history is not newest first:\n%s", history)
		}
		for what, runID := range map[string]string{"bob's run": bob.ID, "globex's run": globex.ID, "the run itself": again.ID} {
			if strings.Contains(history, "/console/runs/"+runID) {
				t.Errorf("the history shows %s %s:\n%s", what, runID, history)
			}
		}
		for _, page := range []string{"/console/approvals/" + card.ID, "/console/", "/console/runs/" + again.ID} {
			if _, body := get(t, c, f.http.URL+page); strings.Contains(body, secret) {
				t.Errorf("%s shows the secret token", page)
			}
		}
	})
}
