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

type orderQuery struct {
	OrderID string `json:"order_id" jsonschema:"the order to look up"`
}

type orderStatus struct {
	OrderID string `json:"order_id"`
	Status  string `json:"status"`
}

func Example() {
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
	agent := &belay.Agent{
		Name:         "orders",
		Instructions: "Answer questions about orders.",
		Tools:        []belay.Tool{getOrder},
		Model: scripted.New(
			scripted.Reply{Calls: []scripted.Call{{Name: "get_order", Args: orderQuery{OrderID: "A-1"}}}},
			scripted.Reply{Text: "Order A-1 has shipped."},
		),
	}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{agent}})
	if err != nil {
		panic(err)
	}
	run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "orders", User: "ada", ClientRequestID: "q-1", Input: "Where is A-1?"})
	if err != nil {
		panic(err)
	}
	if err := rt.Drain(ctx); err != nil {
		panic(err)
	}
	run, _ = st.GetRun(ctx, "", run.ID)
	fmt.Println(run.Status, run.Step, run.Final)
	// Output: done 1 Order A-1 has shipped.
}
