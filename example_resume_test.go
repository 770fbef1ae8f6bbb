package belay_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store/sqlite"
)

// A run that a limit stopped waits, paused, with its checkpoint; a person
// raises the limit and resumes it, and it goes on from where it stopped.
func ExampleOperator_Resume() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "belay-example-")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "belay.db"), sqlite.Config{})
	if err != nil {
		panic(err)
	}
	defer st.Close()

	getOrder := belay.NewTool("get_order", "Look up an order.", belay.Read,
		func(ctx context.Context, q orderQuery) (orderStatus, error) {
			return orderStatus{OrderID: q.OrderID, Status: "shipped"}, nil
		})
	agent := &belay.Agent{Name: "orders", Tools: []belay.Tool{getOrder},
		Budget: belay.Budget{MaxTurns: 1},
		Model: scripted.New(
			scripted.Reply{Calls: []scripted.Call{{Name: "get_order", Args: orderQuery{OrderID: "A-1"}}}},
			scripted.Reply{Text: "Order A-1 has shipped."},
		)}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{agent}})
	if err != nil {
		panic(err)
	}
	run, _, _ := rt.StartRun(ctx, belay.RunRequest{Agent: "orders", User: "ada", ClientRequestID: "q-1", Input: "Where is A-1?"})
	_ = rt.Drain(ctx)

	op := rt.Operator()
	run, _ = op.Wait(ctx, run.Tenant, run.ID)
	fmt.Println(run.Status, run.StopReason, "after", run.Step, "step")
	if _, err := op.Resume(ctx, run.Tenant, run.ID, belay.Raise{Turns: 1}, "human:maya"); err != nil {
		panic(err)
	}
	_ = rt.Drain(ctx)
	run, _ = op.Wait(ctx, run.Tenant, run.ID)
	fmt.Println(run.Status, run.Final)
	// Output:
	// paused max_turns after 1 step
	// done Order A-1 has shipped.
}
