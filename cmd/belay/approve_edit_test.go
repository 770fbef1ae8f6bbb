package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// belay approve --edit names the fields it changes, as the README shows:
// they are merged into the call's arguments and checked against the tool's
// schema before anything is recorded, and the refund then runs with the
// edited amount and the rest of the call as the model asked.
func TestApproveEditMergesAndChecks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "belay.db")
	st, err := openStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	world, err := support.OpenWorld(ctx, db+".world")
	if err != nil {
		t.Fatal(err)
	}
	defer world.Close()
	if err := world.Seed(ctx); err != nil {
		t.Fatal(err)
	}
	rt, err := belay.New(belay.Config{Store: st, HumanApproval: true,
		Agents: []*belay.Agent{support.NewAgent(world, scripted.Func(support.Script()))}})
	if err != nil {
		t.Fatal(err)
	}
	started, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: support.AgentName, Tenant: "acme", User: "ada",
		ClientRequestID: support.TicketID, Input: support.DoubleChargeRequest})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	pending, err := rt.Operator().PendingApprovals(ctx, belay.AnyTenant)
	if err != nil || len(pending) != 1 || pending[0].Tool != "issue_refund" {
		t.Fatalf("pending %+v, %v; want the refund's approval", pending, err)
	}
	a := pending[0]
	belayRun := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(ctx, append(args, "--db", db), &out, &errb)
		return out.String() + errb.String(), err
	}
	for _, bad := range []struct{ edit, want string }{
		{`{"amount_usd": "a hundred"}`, "amount_usd"},
		{`{"charge_id": null}`, "charge_id"},
		{`[100]`, "JSON object"},
	} {
		if out, err := belayRun("approve", a.ID, "--edit", bad.edit); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("approve --edit %s: %v\n%s\nwant it refused, naming %s", bad.edit, err, out, bad.want)
		}
	}
	if got, _ := st.GetApproval(ctx, belay.AnyTenant, a.ID); got.Status != store.ApprovalPending {
		t.Fatalf("after refused edits the approval is %s", got.Status)
	}
	out, err := belayRun("approve", a.ID, "--edit", `{"amount_usd": 100}`, "--as", "human:maya", "--json")
	if err != nil {
		t.Fatalf("approve --edit: %v\n%s", err, out)
	}
	var decided approvalJSON
	if err := json.Unmarshal([]byte(out), &decided); err != nil {
		t.Fatalf("approve --json printed %q: %v", out, err)
	}
	var args map[string]any
	if err := json.Unmarshal(decided.EditedArgs, &args); err != nil || decided.Status != store.ApprovalEdited ||
		args["amount_usd"] != 100.0 || args["charge_id"] != "CH-2" || args["invoice_id"] != "INV-2026-004512" || args["reason"] == nil {
		t.Fatalf("decided %s with %s; want edited, the amount 100 and the call's other fields", decided.Status, decided.EditedArgs)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	refunds, err := world.RefundsOf(ctx, "CH-2")
	if err != nil || len(refunds) != 1 || refunds[0].AmountCents != 10000 {
		t.Fatalf("refunds of CH-2: %+v, %v; want one of 100.00 USD", refunds, err)
	}
	if got, _ := st.GetRun(ctx, belay.AnyTenant, started.ID); got.Status == store.StatusWaitingApproval {
		t.Errorf("run still waits after the edit")
	}
}

// An edit of a tool the command does not know cannot be checked, and is
// refused as the API refuses it, saying how to give the agents.
func TestApproveEditOfAnUnknownToolIsRefused(t *testing.T) {
	t.Parallel()
	db, a := pendingApproval(t)
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"approve", a.ID, "--edit", `{"account": "ACC-1"}`, "--db", db}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "--config") || !strings.Contains(err.Error(), "delete_account") {
		t.Errorf("edit of an unknown tool: %v; want it refused, naming the tool and --config", err)
	}
	// Approved as it is, it needs no check.
	if err := run(context.Background(), []string{"approve", a.ID, "--db", db}, &out, &errb); err != nil {
		t.Errorf("approve: %v", err)
	}
}
