package support

import (
	"context"
	_ "embed"
	"maps"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/policy"
)

// AgentName is the name runs of the support agent are started under.
const AgentName = "support"

// Instructions are the support agent's system prompt.
const Instructions = `You are a support agent on a billing desk. You work one ticket at a time.

Before your first tool call, state your plan on one line: "PLAN: step; step; ...". State it again whenever it changes.

Look before you act: find the policy in the knowledge base, then the customer's account, then the invoice.
Refund only a charge the invoice shows as a duplicate, never the original, and never more than was charged.
Record what you did and why as an internal note on the ticket, then reply to the customer.

Never promise what has not been done: mention a refund only once issue_refund has returned its id.
If a tool keeps failing or the facts do not add up, say so plainly and stop; a person will take over.`

// NewAgent returns the support agent over w, answered by m.
//
// Its requirements are checked against the world, not taken from the model:
// a run is done only if the duplicate charge has a refund, the customer has
// an email and the ticket has a note saying why.
func NewAgent(w *World, m model.Model) *belay.Agent {
	return &belay.Agent{
		Name:          AgentName,
		Model:         m,
		Instructions:  Instructions,
		Tools:         Tools(w),
		Policy:        Policy.Policy(),
		PolicyVersion: Policy.Version(),
		// A copy, so a caller may add the prices of its own models.
		Prices:       maps.Clone(scripted.Prices),
		Requirements: requirements(w),
	}
}

//go:embed policy.yaml
var policyYAML []byte

// Policy is the support desk's approval policy (policy.yaml): refunds above
// 50 USD need a person; replies to the ticket's own customer do not.
var Policy = mustParsePolicy()

func mustParsePolicy() *policy.File {
	f, err := policy.Parse("policy.yaml", policyYAML)
	if err != nil {
		panic(err) // the embedded file is tested
	}
	return f
}

// requirements are what must be true of w when a run ends, for the run's
// own ticket (see ticketOf): every duplicate charge of the customer has a
// refund, the customer has an email and the ticket has a note saying why.
func requirements(w *World) []belay.Requirement {
	return []belay.Requirement{
		{Name: "order refunded", Check: func(ctx context.Context, run belay.RunInfo) (bool, error) {
			s, err := w.TicketState(ctx, ticketOf(run.ClientRequestID))
			if err != nil || len(s.Duplicates) == 0 {
				return false, err
			}
			for _, c := range s.Duplicates {
				if c.RefundID == "" {
					return false, nil
				}
			}
			return true, nil
		}},
		{Name: "customer emailed", Check: func(ctx context.Context, run belay.RunInfo) (bool, error) {
			s, err := w.TicketState(ctx, ticketOf(run.ClientRequestID))
			return len(s.Emails) > 0, err
		}},
		{Name: "reason in CRM", Check: func(ctx context.Context, run belay.RunInfo) (bool, error) {
			notes, err := w.Notes(ctx, ticketOf(run.ClientRequestID))
			return len(notes) > 0, err
		}},
	}
}
