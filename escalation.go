package belay

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// DefaultCustomerMessage is what an escalated run tells the customer unless
// its agent says otherwise.
const DefaultCustomerMessage = "I've passed this to our team with everything I found; a person will get back to you within 2 hours."

// Escalation is the packet a person gets when a run stops for one: built by
// code from the run's record, never written by the model, so it holds what
// happened rather than what the model believes happened.
type Escalation struct {
	RunID  string `json:"run_id"`
	Tenant string `json:"tenant"`
	User   string `json:"user"`
	Agent  string `json:"agent"`
	// Status is what the run became: paused (a person can raise a limit and
	// continue it) or escalated (a person takes over).
	Status store.Status `json:"status"`
	// Reason is the stop reason (budget_usd, max_turns, stuck_loop,
	// unverified, unknown_outcome, kill_switch, ...) and Detail its figures.
	Reason string `json:"reason"`
	Detail string `json:"detail"`
	// Asked is what the customer asked.
	Asked string `json:"asked"`
	// Tried lists the tool calls made, in order, with their outcome.
	Tried []TriedCall `json:"tried"`
	// SideEffects are the ledger rows of the run: what was done to the world
	// and under which key, so that nobody does it again by hand.
	SideEffects []SideEffect `json:"side_effects"`
	// Missing lists the requirements verification found unmet.
	Missing []string `json:"missing,omitempty"`
	// Trace says where the full record is.
	Trace string `json:"trace"`
	// CustomerMessage sets the customer's expectations.
	CustomerMessage string    `json:"customer_message"`
	At              time.Time `json:"at"`
}

// TriedCall is one tool call of an escalated run.
type TriedCall struct {
	Step    int             `json:"step"`
	Tool    string          `json:"tool"`
	Args    json.RawMessage `json:"args"`
	Outcome string          `json:"outcome"`
}

// SideEffect is one ledger row of an escalated run.
type SideEffect struct {
	Tool   string            `json:"tool"`
	Key    string            `json:"key"`
	State  store.EffectState `json:"state"`
	Result string            `json:"result,omitempty"`
}

// escalate stops the run for a person: it builds the packet, records it on
// the run and puts it in the outbox, in the same transaction as the stop.
func (x *execution) escalate(ctx context.Context, status store.Status, reason, detail string, missing []string, over *budgetStop) error {
	packet, err := x.packet(ctx, status, reason, detail, missing)
	if err != nil {
		return err
	}
	raw, err := json.Marshal(packet)
	if err != nil {
		return fmt.Errorf("encode escalation: %w", err)
	}
	x.run.Escalation = raw
	x.outbox = append(x.outbox, store.OutboxMessage{Kind: "escalation", Payload: raw})
	return x.stopWith(ctx, status, reason, detail, over)
}

func (x *execution) packet(ctx context.Context, status store.Status, reason, detail string, missing []string) (Escalation, error) {
	p := Escalation{
		RunID: x.run.ID, Tenant: x.run.Tenant, User: x.run.User, Agent: x.run.Agent,
		Status: status, Reason: reason, Detail: detail, Asked: x.run.Input, Missing: missing,
		Trace:           fmt.Sprintf("belay trace %s (GET /v1/runs/%s/trace)", x.run.ID, x.run.ID),
		CustomerMessage: cmp.Or(x.customerMessage, x.agent.CustomerMessage),
		At:              x.r.cfg.now(),
		Tried:           []TriedCall{},
		SideEffects:     []SideEffect{},
	}
	results := map[string]model.Block{}
	for _, m := range append(x.msgs, model.Message{Content: x.turnResults}) {
		for _, b := range m.Content {
			if b.Type == model.TypeToolResult {
				results[b.ToolUseID] = b
			}
		}
	}
	step := 0
	for _, m := range x.msgs {
		if m.Role != model.RoleAssistant {
			continue
		}
		for _, use := range model.ToolUses(m.Content) {
			outcome := "not run"
			if use.ID == x.unknownCall {
				outcome = "outcome unknown: it may have happened (see its side effect)"
			}
			if res, ok := results[use.ID]; ok {
				outcome = "ok: " + preview(res.Content)
				if res.IsError {
					outcome = "error: " + preview(res.Content)
				}
			}
			p.Tried = append(p.Tried, TriedCall{Step: step, Tool: use.Name, Args: x.agent.tools[use.Name].redact(use.Input), Outcome: outcome})
		}
		step++
	}
	effects, err := x.r.store.Effects(ctx, x.run.Tenant, x.run.ID)
	if err != nil {
		return p, fmt.Errorf("escalation: %w", err)
	}
	for _, e := range effects {
		p.SideEffects = append(p.SideEffects, SideEffect{Tool: e.Tool, Key: e.Key, State: e.State, Result: preview(string(e.Result))})
	}
	return p, nil
}
