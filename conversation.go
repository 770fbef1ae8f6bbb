package belay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/belayrun/belay/internal/ledger"
	"github.com/belayrun/belay/internal/text"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// Conversations: a run that takes more than one message from its user. The
// model asks with the built-in ask_user tool; the run persists a wait (a
// store.Wait, the one durable pending record a run waits on besides its
// approvals), becomes waiting_input and lets go of its lease, holding no
// goroutine and no memory. The user's reply (Operator.Say, POST
// /v1/runs/{id}/messages, belay say) answers the wait and queues the run;
// the turn runs again and the reply is ask_user's result. History, ledger,
// budget and guards carry on, as after any other step.

// AskUserTool is the name of the built-in tool an agent with a Conversation
// offers its model.
const AskUserTool = "ask_user"

// DefaultIdleTimeout is how long a conversation waits for its user's reply
// unless the agent says otherwise.
const DefaultIdleTimeout = 24 * time.Hour

// Conversation lets an agent's runs ask their user a question and wait for
// the reply, for hours if need be.
type Conversation struct {
	// IdleTimeout is how long a run waits for its user's reply. Past it
	// the conversation ends: the run is escalated with the reason
	// conversation_idle, and a late reply is refused. Default
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
}

// askUserSpec is what the model sees of ask_user.
var askUserSpec = model.ToolSpec{
	Name: AskUserTool,
	Description: "Ask the user a question and wait for their reply, which is this tool's result. " +
		"Use it when only the user can choose or tell you something. The conversation waits, for hours if need be; " +
		"ask one clear question at a time.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"question":{"type":"string","description":"The question, as the user will read it."}},"required":["question"],"additionalProperties":false}`),
}

// prepareConversation checks an agent's conversation settings and fills
// their defaults.
func (a *Agent) prepareConversation() error {
	c := a.Conversation
	if c == nil {
		return nil
	}
	if c.IdleTimeout < 0 {
		return fmt.Errorf("agent %q: Conversation.IdleTimeout %v is negative", a.Name, c.IdleTimeout)
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	for _, t := range a.Tools {
		if t.Name == AskUserTool {
			return fmt.Errorf("agent %q: a tool is named %q, the built-in tool of conversations; rename it", a.Name, AskUserTool)
		}
	}
	return nil
}

// askInput is the arguments of an ask_user call.
type askInput struct {
	Question string `json:"question"`
}

func parseAsk(raw json.RawMessage) (askInput, error) {
	var in askInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return askInput{}, fmt.Errorf(`ask_user takes {"question": "..."}: %v`, err)
	}
	if strings.TrimSpace(in.Question) == "" {
		return askInput{}, errors.New(`ask_user needs a question: {"question": "..."}`)
	}
	return in, nil
}

// replyAnswer is how a user's reply is kept on its wait.
type replyAnswer struct {
	Text string `json:"text"`
}

// waitRequest is what a built-in call that makes the run wait asks for.
type waitRequest struct {
	kind   store.WaitKind
	name   string
	prompt json.RawMessage
	ttl    time.Duration
	// says is what the run waits for, in words: the question, or the
	// event.
	says string
}

// waitRequestOf reads a call of a built-in tool that makes the run wait,
// or reports that the call is not one.
func (x *execution) waitRequestOf(use model.Block) (req waitRequest, ok bool, err error) {
	switch {
	case use.Name == AskUserTool && x.agent.Conversation != nil:
		in, err := parseAsk(use.Input)
		if err != nil {
			return waitRequest{}, true, err
		}
		prompt, _ := json.Marshal(in)
		return waitRequest{kind: store.WaitInput, name: AskUserTool, prompt: prompt, ttl: x.agent.Conversation.IdleTimeout,
			says: "asked the user: " + in.Question}, true, nil
	case use.Name == WaitForEventTool && x.agent.Events != nil:
		in, err := parseEventWait(use.Input)
		if err != nil {
			return waitRequest{}, true, err
		}
		prompt, _ := json.Marshal(in)
		return waitRequest{kind: store.WaitEvent, name: in.Name, prompt: prompt, ttl: x.agent.Events.Timeout,
			says: "waits for the event " + in.Name}, true, nil
	}
	return waitRequest{}, false, nil
}

// gateWaits answers the turn's calls of the built-in tools that make the
// run wait (ask_user, wait_for_event) from their waits. If any call's
// answer has not come, none of the turn runs: the missing waits are
// persisted with their notifications, the run waits and is let go, all in
// one transaction; gateWaits then returns errStop. Approvals are settled
// first (gate), so a run never waits for both at once.
func (x *execution) gateWaits(ctx context.Context, calls []gatedCall) ([]gatedCall, error) {
	if x.agent.Conversation == nil && x.agent.Events == nil {
		return calls, nil
	}
	var (
		asks []int
		reqs = map[int]waitRequest{}
	)
	for i, c := range calls {
		if c.result != nil {
			continue
		}
		req, ok, err := x.waitRequestOf(c.use)
		switch {
		case !ok:
		case err != nil:
			blk := x.refuse(c.use, err.Error())
			calls[i].result = &blk
		case x.run.DryRun:
			blk := x.refuse(c.use, "This is a dry run: nothing is waited for. Go on as if the answer had come, and say what you would have waited for.")
			calls[i].result = &blk
		default:
			asks = append(asks, i)
			reqs[i] = req
		}
	}
	if len(asks) == 0 {
		return calls, nil
	}
	waits, err := x.r.waiter.Waits(ctx, store.ListWaitsParams{Tenant: x.run.Tenant, RunID: x.run.ID})
	if err != nil {
		return nil, err
	}
	byUse := make(map[string]store.Wait, len(waits))
	for _, w := range waits {
		byUse[w.ToolUseID] = w
	}
	var missing []store.Wait
	var says []string
	waiting := false
	for _, i := range asks {
		use, req := calls[i].use, reqs[i]
		w, ok := byUse[use.ID]
		switch {
		case !ok:
			missing = append(missing, x.newWait(use, req))
			says = append(says, req.says)
			waiting = true
		case w.Status == store.WaitPending:
			says = append(says, req.says)
			waiting = true
		case w.Status == store.WaitAnswered:
			blk := x.answerResult(use, w)
			calls[i].result = &blk
		case req.kind == store.WaitInput: // expired: the conversation ends
			return nil, x.escalate(ctx, store.StatusEscalated, "conversation_idle", fmt.Sprintf(
				"the user did not reply within %s to: %s", req.ttl, text.Clip(strings.TrimPrefix(req.says, "asked the user: "), 500)), nil, nil)
		default: // expired: the model is told, and decides
			blk := x.refuse(use, fmt.Sprintf("No event %q came within %s; nothing arrived. Go on without it: "+
				"tell the customer what you know, or escalate if it matters.", req.name, req.ttl))
			calls[i].result = &blk
		}
	}
	if waiting {
		return nil, x.awaitInput(ctx, missing, says)
	}
	return calls, nil
}

// newWait builds the pending wait of one call, bound to the call and its
// expiry.
func (x *execution) newWait(use model.Block, req waitRequest) store.Wait {
	expires := x.r.cfg.now().Add(req.ttl).UTC()
	return store.Wait{
		ID: newWaitID(), Tenant: x.run.Tenant, RunID: x.run.ID, Step: x.run.Step, ToolUseID: use.ID,
		Kind: req.kind, Name: req.name, Prompt: req.prompt,
		Binding: waitBinding(x.run.Tenant, x.run.ID, use.ID, req.kind, expires),
		Status:  store.WaitPending, ExpiresAt: expires,
	}
}

// awaitInput persists the missing waits with their notifications and lets
// go of the run. A question to the user is notified (input_requested); an
// event is awaited quietly, as what sends it knows already.
func (x *execution) awaitInput(ctx context.Context, missing []store.Wait, says []string) error {
	for _, w := range missing {
		x.emit(store.EventWaitRequested, store.WaitRequestedData{WaitID: w.ID, Kind: w.Kind, Name: w.Name, Prompt: w.Prompt, ExpiresAt: w.ExpiresAt})
		if w.Kind != store.WaitInput {
			continue
		}
		var in askInput
		_ = json.Unmarshal(w.Prompt, &in)
		payload, _ := json.Marshal(map[string]any{"wait_id": w.ID, "run_id": x.run.ID, "tenant": x.run.Tenant,
			"user": x.run.User, "kind": w.Kind, "question": in.Question, "expires_at": w.ExpiresAt})
		x.outbox = append(x.outbox, store.OutboxMessage{Kind: "input_requested", Payload: payload})
	}
	x.run.Status = store.StatusWaitingInput
	x.run.StopReason = "waiting_input"
	x.run.StopDetail = text.Clip(strings.Join(says, "; "), 2000)
	x.emit(store.EventStop, store.StopData{Status: x.run.Status, Reason: "waiting_input", Detail: x.run.StopDetail})
	if err := x.write(ctx, nil, withRelease(), func(p *store.CheckpointParams) { p.Waits = missing }); err != nil {
		return err
	}
	return errStop
}

// answerResult is the result of a call whose wait was answered: the
// user's reply as text, or the event's payload as it was sent.
func (x *execution) answerResult(use model.Block, w store.Wait) model.Block {
	content := string(w.Answer)
	if w.Kind == store.WaitInput {
		var a replyAnswer
		if err := json.Unmarshal(w.Answer, &a); err == nil {
			content = a.Text
		}
	}
	x.emit(store.EventToolCall, store.ToolCallData{ID: use.ID, Tool: use.Name, Args: use.Input})
	x.emit(store.EventToolResult, store.ToolResultData{ID: use.ID, Tool: use.Name, Preview: preview(content)})
	return model.ToolResultBlock(use.ID, content, false)
}

// waitBinding is what an answer may name to hold only for one wait: the
// tenant, the run, the tool use, the kind and the expiry.
func waitBinding(tenant, runID, toolUseID string, kind store.WaitKind, expires time.Time) string {
	return ledger.Hash([]byte(strings.Join([]string{tenant, runID, toolUseID, string(kind),
		expires.UTC().Format(time.RFC3339Nano)}, "\x00")))
}

func newWaitID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "wt_" + hex.EncodeToString(b[:])
}
