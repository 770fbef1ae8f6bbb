package belay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// A fork is a new run whose history is another run's up to one of its
// steps, optionally with the customer's message changed: "what if the
// customer had said this", or "go on from here with the new version".
//
// A fork never repeats what its parent did. The parent's effects up to the
// step are copied into the fork's ledger under the fork's own keys, with
// their outcomes, when the fork is made: the fork's ledger answers them,
// whatever happens to the parent later (a prune, say), and a fork of a fork
// carries them on. After the step, every side effect is a new intent that
// passes the policy and the approval gate anew; one equal to an effect the
// parent recorded after the step always waits for a person, whatever the
// policy says, and its approval names the parent's effect.

// ForkOptions says where a fork is cut and what it changes.
type ForkOptions struct {
	// Tenant is the parent's tenant; AnyTenant finds it in any.
	Tenant string
	// AtStep is the parent's step the fork's history ends at: the fork
	// holds the parent's messages up to the tool results of that step. 0
	// starts again from the customer's message; the parent's Step forks at
	// its latest completed step.
	AtStep int
	// Message, if not empty, replaces the text of the last message the
	// customer wrote in the fork's history (the run's input when nothing
	// later was said). With AppendMessage it is added at the end of the
	// history instead, as a new customer message.
	Message       string
	AppendMessage bool
	// By names who forked, as "human:<id>": the fork's requester, who may
	// not approve its actions unless the policy allows self-approval.
	By string
	// Reason says why, for the lineage.
	Reason string
}

// ErrForkUnsupported is returned by Fork on a store that cannot fork runs.
var ErrForkUnsupported = errors.New("this store cannot fork runs")

// Fork is Operator.Fork on the runtime's operator.
func (r *Runtime) Fork(ctx context.Context, parentID string, o ForkOptions) (store.Run, error) {
	return r.Operator().Fork(ctx, parentID, o)
}

// Fork makes a queued fork of a run at step o.AtStep (see ForkOptions) and
// records its lineage. Its usage and plan are the parent's at that step, its
// budget the parent's with the time the parent had left at that step (see
// forkBudget), and its guards' state is rebuilt from its history by
// the first worker that claims it. A parent in any status may be forked,
// one still running included: only its completed steps are read.
func (op *Operator) Fork(ctx context.Context, parentID string, o ForkOptions) (store.Run, error) {
	fs, ok := op.store.(store.Forker)
	if !ok {
		return store.Run{}, ErrForkUnsupported
	}
	parent, err := op.store.GetRun(ctx, o.Tenant, parentID)
	if err != nil {
		return store.Run{}, fmt.Errorf("fork: %w", err)
	}
	if o.AtStep < 0 || o.AtStep > parent.Step {
		return store.Run{}, fmt.Errorf("fork: run %s has completed %d steps; fork it at a step from 0 to %d", parentID, parent.Step, parent.Step)
	}
	now := op.now()
	id := newRunID(now)
	history, err := op.forkHistory(ctx, parent, id, o)
	if err != nil {
		return store.Run{}, fmt.Errorf("fork: %w", err)
	}
	usage, err := op.usageAt(ctx, parent, o.AtStep)
	if err != nil {
		return store.Run{}, fmt.Errorf("fork: %w", err)
	}
	budget, err := forkBudget(parent, usage.At, now)
	if err != nil {
		return store.Run{}, fmt.Errorf("fork: %w", err)
	}
	// The fork is on its parent's version, with its tools: a version that
	// continues same tools continues the fork as it would the parent.
	parentEvents, err := op.store.Events(ctx, parent.ID)
	if err != nil {
		return store.Run{}, fmt.Errorf("fork: %w", err)
	}
	tools, err := recordedTools(parentEvents)
	if err != nil {
		return store.Run{}, fmt.Errorf("fork: tools of run %s: %w", parent.ID, err)
	}
	var plan planState
	for _, m := range history.msgs {
		if m.Role == string(model.RoleAssistant) {
			if blocks, err := model.DecodeBlocks(m.Content); err == nil {
				plan.update(model.JoinText(blocks))
			}
		}
	}
	planJSON, _ := json.Marshal(plan)
	guardJSON, _ := json.Marshal(guardState{Fork: &forkOrigin{Parent: parent.ID, AtStep: o.AtStep,
		Request: requestOf(parent)}, Rebuild: true})

	effects, err := op.store.Effects(ctx, parent.Tenant, parent.ID)
	if err != nil {
		return store.Run{}, fmt.Errorf("fork: %w", err)
	}
	var carried []store.Effect
	for _, e := range effects {
		// The effects of step k are recorded at run step k-1: those of the
		// steps the fork holds are the ones below AtStep.
		if e.Step >= o.AtStep {
			continue
		}
		e.Key = forkKey(parent.ID, id, e.Key)
		e.RunID = id
		carried = append(carried, e)
	}
	events := []store.Event{
		event(o.AtStep, now, store.EventRunCreated, store.RunCreatedData{
			Agent: parent.Agent, Version: parent.AgentVersion, Tools: tools, User: parent.User, DryRun: parent.DryRun}),
		event(o.AtStep, now, store.EventForked, store.ForkedData{Parent: parent.ID, AtStep: o.AtStep, By: o.By,
			Reason: o.Reason, Messages: len(history.msgs), Effects: len(carried), MessageChanged: history.changed}),
	}
	p := store.ForkRunParams{
		Run: store.CreateRunParams{ID: id, Tenant: parent.Tenant, User: parent.User, Agent: parent.Agent,
			AgentVersion: parent.AgentVersion, Input: history.input, DryRun: parent.DryRun, RequestedBy: o.By,
			Budget: budget, Sensitive: parent.Sensitive, Now: now, Events: events,
			// The fork acts on what its parent acted on: it shares its key.
			ConcurrencyKey: parent.ConcurrencyKey, ConcurrencyLimit: parent.ConcurrencyLimit, Priority: parent.Priority},
		Step: o.AtStep, InputTokens: usage.InputTokens, OutputTokens: usage.OutputTokens,
		ModelCalls: usage.ModelCalls, CostNanoUSD: usage.CostNanoUSD,
		Plan: planJSON, Guard: guardJSON, Messages: history.msgs, Effects: carried,
		Lineage: store.Lineage{RunID: id, Tenant: parent.Tenant, ParentRunID: parent.ID, AtStep: o.AtStep,
			By: o.By, Reason: o.Reason, CreatedAt: now},
	}
	run, err := fs.ForkRun(ctx, p)
	if err != nil {
		return store.Run{}, fmt.Errorf("fork: %w", err)
	}
	op.observe(run, events)
	op.done()
	return run, nil
}

// forkKey is the fork's key of an effect its parent recorded under
// parentKey: the same intent, named by the fork's run id, as the fork's
// own calls of it will be (ledger.Key).
func forkKey(parentID, forkID, parentKey string) string {
	if rest, ok := strings.CutPrefix(parentKey, parentID+":"); ok {
		return forkID + ":" + rest
	}
	return forkID + ":" + parentKey
}

// requestOf is the client request a run is about: its own, or for a fork
// the one its ancestors were started for.
func requestOf(run store.Run) string {
	if run.ClientRequestID != "" {
		return run.ClientRequestID
	}
	var g guardState
	if json.Unmarshal(run.Guard, &g) == nil && g.Fork != nil {
		return g.Fork.Request
	}
	return ""
}

// forkedHistory is the history a fork starts with.
type forkedHistory struct {
	msgs  []store.Message
	input string
	// changed says which message the fork changed: "replaced" or "added".
	changed string
}

// forkHistory cuts the parent's messages after the tool results of step
// o.AtStep and applies o's message.
func (op *Operator) forkHistory(ctx context.Context, parent store.Run, forkID string, o ForkOptions) (forkedHistory, error) {
	rows, err := op.store.Messages(ctx, parent.ID)
	if err != nil {
		return forkedHistory{}, err
	}
	blocks := make([][]model.Block, len(rows))
	for i, row := range rows {
		if blocks[i], err = model.DecodeBlocks(row.Content); err != nil {
			return forkedHistory{}, fmt.Errorf("message %d of run %s: %w", row.Seq, parent.ID, err)
		}
	}
	cut := min(1, len(rows))
	if o.AtStep > 0 {
		cut = -1
		steps := 0
		for i := 1; i < len(rows); i++ {
			// A step ends with the message that answers an assistant turn's
			// tool calls.
			if rows[i].Role == string(model.RoleUser) && rows[i-1].Role == string(model.RoleAssistant) &&
				len(model.ToolUses(blocks[i-1])) > 0 {
				if steps++; steps == o.AtStep {
					cut = i + 1
					break
				}
			}
		}
		if cut < 0 {
			return forkedHistory{}, fmt.Errorf("run %s records %d steps but its messages hold fewer; fork it at an earlier step", parent.ID, parent.Step)
		}
	}
	h := forkedHistory{input: parent.Input}
	blocks = blocks[:cut]
	if o.Message != "" {
		switch {
		case o.AppendMessage && cut > 0 && rows[cut-1].Role == string(model.RoleUser):
			// Two user messages in a row are refused by model APIs: the new
			// words join the last one.
			blocks[cut-1] = append(blocks[cut-1], model.TextBlock(o.Message))
			h.changed = "added"
		case o.AppendMessage && cut > 0:
			return forkedHistory{}, errors.New("the history at that step ends with the model's turn; add a message at a step that ends with tool results")
		default:
			i := lastCustomerMessage(rows[:cut], blocks)
			if i < 0 && cut > 0 {
				return forkedHistory{}, errors.New("the history at that step holds no message of the customer's to replace; add one instead")
			}
			if i == 0 || cut == 0 {
				h.input = o.Message
			}
			if i >= 0 {
				blocks[i] = []model.Block{model.TextBlock(o.Message)}
			}
			h.changed = "replaced"
		}
	}
	for i := range cut {
		content := rows[i].Content
		if o.Message != "" {
			if content, err = model.EncodeBlocks(blocks[i]); err != nil {
				return forkedHistory{}, err
			}
		}
		h.msgs = append(h.msgs, store.Message{RunID: forkID, Seq: i, Step: rows[i].Step, Role: rows[i].Role,
			Content: content, CreatedAt: rows[i].CreatedAt})
	}
	return h, nil
}

// lastCustomerMessage is the index of the last user message that holds
// words and answers no tool call, or -1.
func lastCustomerMessage(rows []store.Message, blocks [][]model.Block) int {
	for i := len(rows) - 1; i >= 0; i-- {
		if rows[i].Role != string(model.RoleUser) {
			continue
		}
		words := false
		for _, b := range blocks[i] {
			if b.Type == model.TypeToolResult {
				words = false
				break
			}
			words = words || b.Type == model.TypeText
		}
		if words {
			return i
		}
	}
	return -1
}

// forkUsage is what a run had used by a step.
type forkUsage struct {
	InputTokens, OutputTokens, ModelCalls, CostNanoUSD int64
	// At is when the parent reached the fork's step: the time of its last
	// event before the step, or its creation for step 0.
	At time.Time
}

// usageAt adds up the model calls the parent's trace records before step
// atStep: the call that asked for step k's tools is recorded at step k-1.
func (op *Operator) usageAt(ctx context.Context, parent store.Run, atStep int) (forkUsage, error) {
	u := forkUsage{At: parent.CreatedAt}
	if atStep == 0 {
		return u, nil
	}
	events, err := op.store.Events(ctx, parent.ID)
	if err != nil {
		return u, err
	}
	for _, ev := range events {
		if ev.Step >= atStep {
			continue
		}
		if ev.Time.After(u.At) {
			u.At = ev.Time
		}
		if ev.Type != store.EventModelCall {
			continue
		}
		d, err := store.DecodeEvent[store.ModelCallData](ev)
		if err != nil {
			return u, fmt.Errorf("model call event %d of run %s: %w", ev.Seq, parent.ID, err)
		}
		u.InputTokens += d.InputTokens
		u.OutputTokens += d.OutputTokens
		u.ModelCalls++
		u.CostNanoUSD += int64(math.Round(d.CostUSD * 1e9))
	}
	return u, nil
}

// forkBudget is the parent's budget for a fork made at now of the parent as
// it was at time at. The parent's absolute deadline may have passed long
// before the fork is made, so the fork gets the time the parent had left
// at the fork's step instead (none, if the parent had run out). A budget
// recorded before budgets had limits of their own counts its deadline from
// the fork's creation, as it would for any run created then.
func forkBudget(parent store.Run, at, now time.Time) (json.RawMessage, error) {
	if len(parent.Budget) == 0 {
		return parent.Budget, nil
	}
	var b runBudget
	if err := json.Unmarshal(parent.Budget, &b); err != nil {
		return nil, fmt.Errorf("budget of run %s: %w", parent.ID, err)
	}
	if b.DeadlineAt.IsZero() || !b.recorded() {
		return parent.Budget, nil
	}
	b.DeadlineAt = now.Add(max(b.DeadlineAt.Sub(at), 0))
	return json.Marshal(b)
}
