package belay_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store/sqlite"
)

type partialRefund struct {
	ChargeID  string  `json:"charge_id" jsonschema:"the charge to refund"`
	AmountUSD float64 `json:"amount_usd" jsonschema:"how much to refund"`
	Reason    string  `json:"reason" jsonschema:"why, for the customer's record"`
}

// A person edits a call before it runs: the edit names only the fields it
// changes, and they are merged into the call's arguments (a field given as
// null would be removed). The merged call is checked against the tool's
// input schema before the decision is recorded.
func ExampleOperator_Decide_edit() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "belay-example-")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "belay.db"), sqlite.Config{})
	if err != nil {
		panic(err)
	}
	defer st.Close()

	refund := belay.NewTool("refund", "Refund a charge.", belay.Irreversible,
		func(ctx context.Context, in partialRefund) (map[string]any, error) {
			fmt.Printf("refund %.2f USD on %s (%s)\n", in.AmountUSD, in.ChargeID, in.Reason)
			return map[string]any{"refund_id": "RF-1"}, nil
		})
	agent := &belay.Agent{Name: "support", Tools: []belay.Tool{refund}, Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: "refund",
			Args: partialRefund{ChargeID: "CH-2", AmountUSD: 288, Reason: "duplicate charge"}}}},
		scripted.Reply{Text: "Refunded."},
	)}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{agent}, HumanApproval: true})
	if err != nil {
		panic(err)
	}
	run, _, _ := rt.StartRun(ctx, belay.RunRequest{Agent: "support", User: "ada", ClientRequestID: "T-1", Input: "charged twice"})
	_ = rt.Drain(ctx)

	// The runtime's operator knows the agent's tools, so it checks the
	// edit; one edit that would not fit is refused and changes nothing.
	op := rt.Operator()
	pending, _ := op.PendingApprovals(ctx, belay.AnyTenant)
	a := pending[0]
	_, err = op.Decide(ctx, a.Tenant, a.ID, belay.ApprovalDecision{Choice: belay.Edit, By: "human:maya",
		EditedArgs: json.RawMessage(`{"amount_usd": "a hundred"}`)})
	fmt.Println("refused:", err != nil)
	decided, err := op.Decide(ctx, a.Tenant, a.ID, belay.ApprovalDecision{Choice: belay.Edit, By: "human:maya",
		EditedArgs: json.RawMessage(`{"amount_usd": 100}`), Note: "partial refund agreed"})
	if err != nil {
		panic(err)
	}
	fmt.Println(decided.Status, string(decided.EditedArgs))
	_ = rt.Drain(ctx)
	run, _ = op.Wait(ctx, run.Tenant, run.ID)
	fmt.Println(run.Status)
	// Output:
	// refused: true
	// edited {"charge_id":"CH-2","amount_usd":100,"reason":"duplicate charge"}
	// refund 100.00 USD on CH-2 (duplicate charge)
	// done
}
