package belay

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/belayrun/belay/store"
)

// An edit names the fields it changes; they are merged into the call's
// arguments, the call's order kept, and null removes a field.
func TestMergeEdit(t *testing.T) {
	t.Parallel()
	call := json.RawMessage(`{"charge_id":"CH-2","amount":288, "reason":"duplicate","meta":{"a":1}}`)
	cases := []struct {
		name, edit, want, err string
	}{
		{"one field", `{"amount":100}`, `{"charge_id":"CH-2","amount":100,"reason":"duplicate","meta":{"a":1}}`, ""},
		{"every field, as a console posts them", `{"charge_id":"CH-2","amount":250,"reason":"duplicate","meta":{"a":1}}`,
			`{"charge_id":"CH-2","amount":250,"reason":"duplicate","meta":{"a":1}}`, ""},
		{"null removes", `{"reason":null}`, `{"charge_id":"CH-2","amount":288,"meta":{"a":1}}`, ""},
		{"null of a field the call lacks", `{"note":null}`, `{"charge_id":"CH-2","amount":288,"reason":"duplicate","meta":{"a":1}}`, ""},
		{"a new field follows", `{"note":"x"}`, `{"charge_id":"CH-2","amount":288,"reason":"duplicate","meta":{"a":1},"note":"x"}`, ""},
		{"a nested object is replaced whole", `{"meta":{"b":2}}`, `{"charge_id":"CH-2","amount":288,"reason":"duplicate","meta":{"b":2}}`, ""},
		{"not an object", `[1]`, "", "is not a JSON object"},
		{"a bare value", `100`, "", "is not a JSON object"},
		{"not JSON", `{"amount":`, "", "is not valid JSON"},
		{"a field twice", `{"amount":1,"amount":2}`, "", `names the field "amount" twice`},
		{"trailing bytes", `{"amount":1} {}`, "", "something follows"},
	}
	for _, c := range cases {
		got, err := mergeEdit(call, json.RawMessage(c.edit))
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %s gave %s, %v; want an error saying %q", c.name, c.edit, got, err, c.err)
		case c.err == "" && (err != nil || string(got) != c.want):
			t.Errorf("%s: %s gave %s, %v; want %s", c.name, c.edit, got, err, c.want)
		}
	}
	if _, err := mergeEdit(json.RawMessage(`"CH-2"`), json.RawMessage(`{"amount":1}`)); err == nil {
		t.Error("an edit of arguments that are not an object was merged")
	}
}

// A person who changes one argument gives that one: the call runs with it
// and the others as the model asked. Checked against the tool's schema
// before anything is recorded, by a runtime's operator; an edit that
// changes nothing is refused, since it is an approval.
func TestEditOfOneFieldRunsTheWholeCall(t *testing.T) {
	t.Parallel()
	f := newApprovalFixture(t)
	a := f.waitForApproval(t)
	ctx := context.Background()
	op := f.rt.Operator()
	for _, bad := range []struct{ edit, why string }{
		{`{"amount":"lots"}`, "amount"},
		{`{"charge_id":null}`, "charge_id"},
		{`{"amount":288}`, "changes no argument"},
		{`{"amount":1,"amount":2}`, "twice"},
	} {
		_, err := op.Decide(ctx, AnyTenant, a.ID, ApprovalDecision{Choice: Edit, By: "human:maya", EditedArgs: json.RawMessage(bad.edit)})
		if !errors.Is(err, ErrInvalidEdit) || !strings.Contains(err.Error(), bad.why) {
			t.Errorf("edit %s: %v; want ErrInvalidEdit saying %q", bad.edit, err, bad.why)
		}
	}
	if got, _ := f.st.GetApproval(ctx, AnyTenant, a.ID); got.Status != store.ApprovalPending {
		t.Fatalf("after refused edits the approval is %s", got.Status)
	}
	decided, err := op.Decide(ctx, AnyTenant, a.ID, ApprovalDecision{Choice: Edit, By: "human:maya", EditedArgs: json.RawMessage(`{"amount": 100}`)})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"charge_id":"CH-2","amount":100}`; decided.Status != store.ApprovalEdited || string(decided.EditedArgs) != want {
		t.Errorf("decided %s with %s; want edited with %s", decided.Status, decided.EditedArgs, want)
	}
	if run := f.drain(t, f.rt); run.Status != store.StatusDone {
		t.Fatalf("run %s (%s): %s", run.Status, run.StopReason, run.StopDetail)
	}
	f.world.mu.Lock()
	got := f.world.refunds
	f.world.mu.Unlock()
	if len(got) != 1 || got[0].ChargeID != "CH-2" || got[0].Amount != 100 {
		t.Fatalf("refunds %+v, want one of 100 on CH-2", got)
	}
}

// An operator over a bare store (the CLI's, without the agent's code)
// merges an edit the same way; it cannot check the schema.
func TestBareOperatorMergesAnEdit(t *testing.T) {
	t.Parallel()
	f := newApprovalFixture(t)
	a := f.waitForApproval(t)
	op := NewOperator(f.st)
	op.now = f.clock.Now
	decided, err := op.Decide(context.Background(), AnyTenant, a.ID,
		ApprovalDecision{Verdict: "edit", By: "human:maya", EditedArgs: json.RawMessage(`{"amount":100}`)})
	if want := `{"charge_id":"CH-2","amount":100}`; err != nil || string(decided.EditedArgs) != want {
		t.Fatalf("decided %s, %v; want %s", decided.EditedArgs, err, want)
	}
	if run := f.drain(t, f.rt); run.Status != store.StatusDone {
		t.Fatalf("run %s (%s): %s", run.Status, run.StopReason, run.StopDetail)
	}
	if refunds, _ := f.world.counts(); refunds != 1 || f.world.refunds[0].Amount != 100 {
		t.Errorf("refunds %+v, want one of 100", f.world.refunds)
	}
}

// A decision's choice is typed; the bare string of older code still
// works, and the two may not disagree.
func TestDecisionChoice(t *testing.T) {
	t.Parallel()
	cases := []struct {
		d    ApprovalDecision
		want ApprovalChoice
		err  string
	}{
		{ApprovalDecision{Choice: Approve}, Approve, ""},
		{ApprovalDecision{Verdict: "reject"}, Reject, ""},
		{ApprovalDecision{Choice: Edit, Verdict: "edit"}, Edit, ""},
		{ApprovalDecision{Choice: Approve, Verdict: "reject"}, "", "differ"},
		{ApprovalDecision{}, "", "needs a choice"},
		{ApprovalDecision{Choice: "maybe"}, "", `choice "maybe"`},
	}
	for _, c := range cases {
		got, err := c.d.choice()
		if got != c.want || (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%+v: %q, %v; want %q, an error saying %q", c.d, got, err, c.want, c.err)
		}
	}
}
