package belay_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store/sqlite"
)

type ticketRequest struct {
	Customer string `json:"customer" jsonschema:"who the ticket is for"`
	Subject  string `json:"subject" jsonschema:"what it is about"`
}

type ticket struct {
	ID string `json:"id"`
}

// helpdesk is a downstream system that opens tickets and keeps the key each
// was opened under; its first answer is lost on the way back.
type helpdesk struct {
	byKey      map[string]ticket
	loseAnswer bool
}

func (h *helpdesk) open(ctx context.Context, in ticketRequest) (ticket, error) {
	ci, _ := belay.CallInfoFrom(ctx)
	t := ticket{ID: fmt.Sprintf("TK-%d", len(h.byKey)+1)}
	h.byKey[ci.IdempotencyKey] = t
	if h.loseAnswer {
		h.loseAnswer = false
		// The ticket is open; the caller cannot know it.
		return ticket{}, fmt.Errorf("helpdesk: connection reset: %w", belay.ErrUnknownOutcome)
	}
	return t, nil
}

func (h *helpdesk) find(ctx context.Context, key string, in ticketRequest) (ticket, bool, error) {
	t, ok := h.byKey[key]
	return t, ok, nil
}

// A call whose answer was lost is not made again blindly: the tool's
// reconcile asks the downstream system, by the call's idempotency key,
// whether it happened. WithReconcile declares it in the tool's own types.
func ExampleWithReconcile() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "belay-example-")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(ctx, filepath.Join(dir, "belay.db"), sqlite.Config{})
	if err != nil {
		panic(err)
	}
	defer st.Close()

	desk := &helpdesk{byKey: map[string]ticket{}, loseAnswer: true}
	openTicket := belay.NewTool("open_ticket", "Open a helpdesk ticket.", belay.Write, desk.open,
		belay.WithReconcile(desk.find))
	openTicket.Retry.BaseDelay = time.Millisecond // the wait before asking
	agent := &belay.Agent{Name: "support", Tools: []belay.Tool{openTicket}, Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: "open_ticket",
			Args: ticketRequest{Customer: "ada", Subject: "charged twice"}}}},
		scripted.Reply{Text: "Ticket opened."},
	)}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{agent}})
	if err != nil {
		panic(err)
	}
	run, _, _ := rt.StartRun(ctx, belay.RunRequest{Agent: "support", User: "ada", ClientRequestID: "T-2", Input: "open a ticket"})
	_ = rt.Drain(ctx)

	run, _ = rt.Operator().Wait(ctx, run.Tenant, run.ID)
	effects, _ := st.Effects(ctx, run.Tenant, run.ID)
	fmt.Println(run.Status, "tickets:", len(desk.byKey))
	fmt.Println(effects[0].Tool, effects[0].State, string(effects[0].Result))
	// Output:
	// done tickets: 1
	// open_ticket done {"id":"TK-1"}
}
