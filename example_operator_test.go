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

type refundRequest struct {
	ChargeID  string  `json:"charge_id" jsonschema:"the charge to refund"`
	AmountUSD float64 `json:"amount_usd" jsonschema:"how much to refund"`
}

// An irreversible call waits for a person: the run lets go of its worker,
// a person finds the approval with an Operator (here over the bare store,
// as the belay CLI does) and decides it, and the run goes on.
func ExampleOperator() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "belay-example-")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "belay.db"), sqlite.Config{})
	if err != nil {
		panic(err)
	}
	defer st.Close()

	refund := belay.NewTool("refund", "Refund a charge.", belay.Irreversible,
		func(ctx context.Context, in refundRequest) (map[string]string, error) {
			return map[string]string{"refund_id": "RF-1"}, nil
		})
	refund.Summarize = func(json.RawMessage) string { return "Refund 29.00 USD on CH-2" }
	agent := &belay.Agent{Name: "support", Tools: []belay.Tool{refund}, Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: "refund", Args: refundRequest{ChargeID: "CH-2", AmountUSD: 29}}}},
		scripted.Reply{Text: "Refunded."},
	)}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{agent}, HumanApproval: true})
	if err != nil {
		panic(err)
	}
	run, _, _ := rt.StartRun(ctx, belay.RunRequest{Agent: "support", User: "ada", ClientRequestID: "T-1", Input: "charged twice"})
	_ = rt.Drain(ctx)

	op := belay.NewOperator(st)
	pending, _ := op.PendingApprovals(ctx, belay.AnyTenant)
	for _, a := range pending {
		fmt.Println("waiting:", a.Summary)
		if _, err := op.Decide(ctx, a.Tenant, a.ID, belay.ApprovalDecision{Choice: belay.Approve, By: "human:maya"}); err != nil {
			panic(err)
		}
	}
	_ = rt.Drain(ctx)
	run, _ = op.Wait(ctx, run.Tenant, run.ID)
	fmt.Println(run.Status, run.Final)
	// Output:
	// waiting: Refund 29.00 USD on CH-2
	// done Refunded.
}
