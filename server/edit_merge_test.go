package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/belayrun/belay/store"
)

// An edit names the fields it changes, through the API as through the
// console's form: they are merged into the call's arguments, checked
// against the tool's schema, and the call runs with the rest as the model
// asked. Both decide through Operator.Decide, where the merge is made.
func TestEditsMergeThroughTheAPIAndTheConsole(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	op := f.key("acme", "ops", store.RoleOperator)
	approver := f.key("acme", "maya", store.RoleApprover)

	// The API: one field.
	run, a := f.approvalFlow(op, approver)
	path := "/v1/approvals/" + a.ID + "/decision"
	for _, bad := range []struct {
		args map[string]any
		why  string
	}{
		{map[string]any{"amount_usd": "lots"}, "amount_usd"},
		{map[string]any{"charge_id": nil}, "charge_id"},
	} {
		res := f.do("POST", path, approver, map[string]any{"decision": "edit", "binding": a.Binding, "arguments": bad.args})
		if res.status != http.StatusUnprocessableEntity || res.code(t) != "invalid_arguments" || !strings.Contains(res.message(t), bad.why) {
			t.Errorf("edit %v: %d %s; want 422 invalid_arguments naming %s", bad.args, res.status, res.body, bad.why)
		}
	}
	res := f.do("POST", path, approver, map[string]any{"decision": "edit", "binding": a.Binding,
		"arguments": map[string]any{"amount_usd": 100}})
	var decided approvalView
	res.json(t, &decided)
	if res.status != 200 || decided.Status != store.ApprovalEdited {
		t.Fatalf("edit of one field: %d %s", res.status, res.body)
	}
	var args map[string]any
	if err := json.Unmarshal(decided.EditedArgs, &args); err != nil || args["amount_usd"] != 100.0 ||
		args["charge_id"] != "CH-2" || args["invoice_id"] != "INV-2026-004512" || args["reason"] == nil {
		t.Errorf("edited arguments %s: want the amount changed and the call's other fields kept", decided.EditedArgs)
	}
	f.drain()
	if refunds, err := f.world.RefundsOf(t.Context(), "CH-2"); err != nil || len(refunds) != 1 || refunds[0].AmountCents != 10000 {
		t.Fatalf("refunds of CH-2 after the API's edit of run %s: %+v, %v; want one of 100.00 USD", run.ID, refunds, err)
	}

	// The console's form, on a second ticket of the same customer: the
	// person keeps only the field they change in the box.
	second := f.start(op, "T-1002", "support", "ada", strings.Replace(demoInput, "T-1001", "T-1002", 1))
	f.drain()
	pending := f.pending(approver)
	if len(pending) != 1 || pending[0].RunID != second.ID {
		t.Fatalf("pending %+v; want the second run's approval", pending)
	}
	b := pending[0]
	c := f.signIn(approver)
	decide := f.http.URL + "/console/approvals/" + b.ID + "/decision"
	status, _, body := post(t, c, decide, url.Values{"decision": {"edit"}, "binding": {b.Binding}, "arguments": {`{"amount_usd": "lots"}`}})
	if status != 200 || !strings.Contains(body, "amount_usd") {
		t.Errorf("the console's edit that breaks the schema: %d; want the card again, naming amount_usd", status)
	}
	status, loc, _ := post(t, c, decide, url.Values{"decision": {"edit"}, "binding": {b.Binding}, "arguments": {`{"amount_usd": 50}`}})
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/console/runs/"+second.ID) {
		t.Fatalf("the console's edit of one field: %d to %q", status, loc)
	}
	got, err := f.st.GetApproval(t.Context(), "acme", b.ID)
	if err != nil || got.Status != store.ApprovalEdited || !strings.Contains(string(got.EditedArgs), `"charge_id":"CH-2"`) ||
		!strings.Contains(string(got.EditedArgs), `"amount_usd":50`) {
		t.Errorf("the console's edit recorded %s (%s), %v; want the amount merged into the call", got.EditedArgs, got.Status, err)
	}
}
