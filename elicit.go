package belay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/belayrun/belay/internal/ledger"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// Questions a tool asks during its call (Elicit): an MCP server's
// elicitation, say, which asks "refund to your card or as store credit?"
// while the server's tool runs. Unlike ask_user and ask_person, the call
// cannot be put off: the server holds it open until it has the answer. So:
//
//   - The question is a wait like any other (store.Wait, of kind input or
//     person as the agent's Elicitations say), written durably in a
//     checkpoint of the running run, with its wait_requested event and its
//     input_requested notification. It is listed, shown and answered as the
//     others are (Operator.Say, Operator.PostResult), by anyone, from any
//     process.
//   - The call keeps its lease and waits in process, reading the store for
//     the answer, until the wait's expiry: the call's timeout less a margin
//     for the server to finish, so a question of a tool with the default
//     30 s timeout has under 30 s. Give a tool that asks people a Timeout
//     as long as they take.
//   - If the worker dies meanwhile, the call is lost with it, and its
//     outcome follows the tool's effect class, as for any call lost in
//     flight: a read is called again, a side effect's outcome is unknown and
//     resolved without calling blindly again. A call made again that asks
//     the same question finds the wait it asked before: still pending, it
//     waits on it; answered, it gets the answer at once. Nobody is asked
//     twice.
//   - Past its expiry a wait gives the tool "cancel", never an answer
//     nobody gave; an answer that comes later is refused as late.

// ElicitAction is what the answerer did with a question a tool asked.
type ElicitAction string

const (
	// ElicitAccept: the answerer answered; Content holds the answer.
	ElicitAccept ElicitAction = "accept"
	// ElicitDecline: the answerer refused to answer.
	ElicitDecline ElicitAction = "decline"
	// ElicitCancel: nobody answered (the wait expired, or the call ended).
	ElicitCancel ElicitAction = "cancel"
)

// Elicitation is a question a tool asks during its call.
type Elicitation struct {
	// Message is the question, as the answerer reads it. Required.
	Message string
	// Schema is the JSON Schema of the answer: an object of flat fields
	// (strings, numbers, booleans, enums), as MCP's elicitation allows. An
	// answer that does not fit it is refused to the answerer, with why.
	// Default: no fields; the answerer accepts or declines.
	Schema json.RawMessage
}

// ElicitAnswer is the answer to an Elicitation.
type ElicitAnswer struct {
	Action ElicitAction `json:"action"`
	// Content is the answer's fields, a JSON object fitting the schema,
	// when Action is ElicitAccept.
	Content json.RawMessage `json:"content,omitempty"`
}

// Elicitations says who answers the questions an agent's tools ask during
// their calls.
type Elicitations struct {
	// User sends them to the run's user, who answers as they reply to
	// ask_user (Operator.Say). Default false: a person of Role answers,
	// as for ask_person (Operator.PostResult); a server's question then
	// reaches a member of the team, who judges it, rather than the
	// customer.
	User bool
	// Role is who may answer when a person does. Default approver.
	Role store.Role
}

func (e *Elicitations) prepare(agent string) error {
	if e == nil {
		return nil
	}
	switch e.Role {
	case "":
		e.Role = store.RoleApprover
	case store.RoleApprover, store.RoleOperator, store.RoleAdmin:
	default:
		return fmt.Errorf("agent %q: Elicitations.Role %q; want approver, operator or admin", agent, e.Role)
	}
	return nil
}

// defaultElicitations is who answers when the agent does not say.
var defaultElicitations = Elicitations{Role: store.RoleApprover}

// ErrNotInCall is returned by Elicit outside a tool call of a run.
var ErrNotInCall = errors.New("elicit: not in a tool call of a run; only a call the runtime makes can ask")

// ElicitPoll is how often a call that asked reads the store for the answer.
const ElicitPoll = 250 * time.Millisecond

// Elicit asks a question during the tool call of ctx and waits for the
// answer (see Elicitations for who answers): an ElicitAccept with the
// answer's content, an ElicitDecline, or an ElicitCancel once the question
// expires, shortly before the call's timeout. The question is a durable
// wait of the run, answered like the others; a call made again after a
// crash that asks it again gets the same wait. Outside a call of a run it
// is ErrNotInCall.
func Elicit(ctx context.Context, q Elicitation) (ElicitAnswer, error) {
	e, ok := ctx.Value(elicitorKey{}).(*elicitor)
	if !ok {
		return ElicitAnswer{}, ErrNotInCall
	}
	if strings.TrimSpace(q.Message) == "" {
		return ElicitAnswer{}, errors.New("elicit: the question has no message")
	}
	if len(bytes.TrimSpace(q.Schema)) == 0 {
		q.Schema = nil
	} else if _, err := elicitSchema(q.Schema); err != nil {
		return ElicitAnswer{}, fmt.Errorf("elicit: %w", err)
	}
	req := elicitRequest{q: q, reply: make(chan elicitReply, 1)}
	select {
	case e.asks <- req:
	case <-ctx.Done():
		return ElicitAnswer{}, ctx.Err()
	}
	var rep elicitReply
	select {
	case rep = <-req.reply:
	case <-ctx.Done():
		return ElicitAnswer{}, ctx.Err()
	}
	if rep.err != nil {
		return ElicitAnswer{}, rep.err
	}
	return e.await(ctx, rep.wait)
}

type elicitorKey struct{}

// elicitor lets the tool call of one invoke ask questions: the call's
// goroutine sends them to the execution's, which writes them (it owns the
// run's state), and then waits for the answer on its own.
type elicitor struct {
	asks   chan elicitRequest
	waiter store.Waiter
	now    func() time.Time
	// asked counts the questions of this attempt of the call, so the same
	// question asked twice in one attempt is two waits, and asked again in
	// the next attempt is the first's.
	asked int
}

type elicitRequest struct {
	q     Elicitation
	reply chan elicitReply
}

type elicitReply struct {
	wait store.Wait
	err  error
}

// elicitPrompt is the Prompt of a question a tool asked during its call: a
// question to the user or a person (Question, Role) with the form of its
// answer, which Say and PostResult read to check an answer.
type elicitPrompt struct {
	Question    string     `json:"question"`
	Role        store.Role `json:"role,omitempty"`
	Elicitation elicitForm `json:"elicitation"`
}

type elicitForm struct {
	// Tool is the tool whose call asks.
	Tool   string          `json:"tool"`
	Schema json.RawMessage `json:"schema,omitempty"`
}

// elicitMargin is the time a tool is left, after its question expires,
// to end its call before the call's timeout: a tenth of the time it has,
// at most elicitMarginMax.
const elicitMarginMax = 5 * time.Second

// elicit writes the wait of a question the call of use asks, or finds the
// one an earlier attempt of the call wrote for it, on the execution's
// goroutine. notAfter is the call's timeout.
func (x *execution) elicit(ctx context.Context, e *elicitor, use model.Block, notAfter time.Time, q Elicitation) (store.Wait, error) {
	if x.r.waiter == nil {
		return store.Wait{}, ErrWaitsUnsupported
	}
	cfg := defaultElicitations
	if x.agent.Elicitations != nil {
		cfg = *x.agent.Elicitations
	}
	e.asked++
	now := x.r.cfg.now()
	left := notAfter.Sub(now)
	expires := notAfter.Add(-min(elicitMarginMax, left/10)).UTC()
	if !expires.After(now) {
		return store.Wait{}, fmt.Errorf("elicit: the call of %s has no time left to wait for an answer", use.Name)
	}
	kind := store.WaitPerson
	prompt := elicitPrompt{Question: q.Message, Role: cfg.Role, Elicitation: elicitForm{Tool: use.Name, Schema: q.Schema}}
	if cfg.User {
		kind, prompt.Role = store.WaitInput, ""
	}
	raw, _ := json.Marshal(prompt)
	// The wait's call id names the question within the call: a call made
	// again asks the same questions in the same order, and finds them.
	callID := fmt.Sprintf("%s.q%d.%s", use.ID, e.asked, ledger.Hash([]byte(q.Message + "\x00" + string(q.Schema)))[:8])
	w := store.Wait{
		ID: newWaitID(), Tenant: x.run.Tenant, RunID: x.run.ID, Step: x.run.Step, ToolUseID: callID,
		Kind: kind, Name: use.Name, Prompt: raw,
		Binding: waitBinding(x.run.Tenant, x.run.ID, callID, kind, expires),
		Status:  store.WaitPending, ExpiresAt: expires,
	}
	waits, err := x.r.waiter.Waits(ctx, store.ListWaitsParams{Tenant: x.run.Tenant, RunID: x.run.ID})
	if err != nil {
		return store.Wait{}, fmt.Errorf("elicit: %w", err)
	}
	if i := slices.IndexFunc(waits, func(w store.Wait) bool { return w.ToolUseID == callID }); i >= 0 {
		return waits[i], nil
	}
	x.emit(store.EventWaitRequested, store.WaitRequestedData{WaitID: w.ID, Kind: w.Kind, Name: w.Name, Prompt: w.Prompt, ExpiresAt: w.ExpiresAt})
	payload, _ := json.Marshal(map[string]any{"wait_id": w.ID, "run_id": x.run.ID, "tenant": x.run.Tenant,
		"user": x.run.User, "kind": w.Kind, "question": q.Message, "form": q.Schema, "role": prompt.Role,
		"tool": use.Name, "call_id": callID, "binding": w.Binding, "expires_at": w.ExpiresAt})
	x.outbox = append(x.outbox, store.OutboxMessage{Kind: "input_requested", Payload: payload})
	if err := x.write(ctx, nil, func(p *store.CheckpointParams) { p.Waits = []store.Wait{w} }); err != nil {
		return store.Wait{}, fmt.Errorf("elicit: %w", err)
	}
	return w, nil
}

// await reads the store until w is answered or expires.
func (e *elicitor) await(ctx context.Context, w store.Wait) (ElicitAnswer, error) {
	t := time.NewTicker(ElicitPoll)
	defer t.Stop()
	for {
		switch w.Status {
		case store.WaitAnswered:
			var a ElicitAnswer
			if err := json.Unmarshal(w.Answer, &a); err != nil || a.Action == "" {
				return ElicitAnswer{Action: ElicitCancel}, nil
			}
			return a, nil
		case store.WaitExpired:
			return ElicitAnswer{Action: ElicitCancel}, nil
		}
		if !w.ExpiresAt.After(e.now()) {
			return ElicitAnswer{Action: ElicitCancel}, nil
		}
		select {
		case <-ctx.Done():
			return ElicitAnswer{}, ctx.Err()
		case <-t.C:
		}
		waits, err := e.waiter.Waits(ctx, store.ListWaitsParams{Tenant: w.Tenant, RunID: w.RunID})
		if err != nil {
			if ctx.Err() != nil {
				return ElicitAnswer{}, ctx.Err()
			}
			continue // the store may be back at the next read
		}
		if i := slices.IndexFunc(waits, func(x store.Wait) bool { return x.ID == w.ID }); i >= 0 {
			w = waits[i]
		}
	}
}

// elicitSchema resolves the form of a question's answer.
func elicitSchema(raw json.RawMessage) (*jsonschema.Resolved, error) {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("the answer's schema is not a JSON Schema: %w", err)
	}
	if s.Type != "object" {
		return nil, fmt.Errorf("the answer's schema is of type %q; it must be an object of fields", s.Type)
	}
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("the answer's schema: %w", err)
	}
	return r, nil
}

// readElicitPrompt reports whether w is a question a tool asked during its
// call, and its prompt.
func readElicitPrompt(w store.Wait) (elicitPrompt, bool) {
	var p elicitPrompt
	if err := json.Unmarshal(w.Prompt, &p); err != nil || p.Elicitation.Tool == "" {
		return elicitPrompt{}, false
	}
	return p, true
}

// elicitAnswerOf makes the answer to a tool's question from what the
// answerer sent, and checks it against the question's form. value is
// either {"action": "decline"}, {"action": "cancel"}, {"action": "accept",
// "content": {...}}, the content object alone, or, for a form of one field,
// that field's value: a JSON value, or from a user's reply, the text.
func elicitAnswerOf(p elicitPrompt, value json.RawMessage, text string) (json.RawMessage, error) {
	var a ElicitAnswer
	var probe map[string]json.RawMessage
	switch {
	case json.Unmarshal(value, &probe) == nil && probe["action"] != nil:
		if err := json.Unmarshal(value, &a); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrWrongAnswer, err)
		}
		switch a.Action {
		case ElicitDecline, ElicitCancel:
			a.Content = nil
		case ElicitAccept:
		default:
			return nil, fmt.Errorf("%w: action %q; want accept, decline or cancel", ErrWrongAnswer, a.Action)
		}
	case probe != nil:
		a = ElicitAnswer{Action: ElicitAccept, Content: value}
	default:
		field, ok := soleField(p.Elicitation.Schema)
		if !ok {
			return nil, fmt.Errorf("%w: %s asks for %s; answer with a JSON object of them, or {\"action\": \"decline\"}",
				ErrWrongAnswer, p.Elicitation.Tool, describeFields(p.Elicitation.Schema))
		}
		v, err := fieldValue(field, value, text)
		if err != nil {
			return nil, err
		}
		content, _ := json.Marshal(map[string]any{field.name: v})
		a = ElicitAnswer{Action: ElicitAccept, Content: content}
	}
	if a.Action == ElicitAccept {
		if err := checkElicitContent(p.Elicitation.Schema, a.Content); err != nil {
			return nil, err
		}
	}
	out, _ := json.Marshal(a)
	return out, nil
}

// checkElicitContent checks an accepted answer's content against the form.
func checkElicitContent(schema, content json.RawMessage) error {
	if len(content) == 0 {
		content = json.RawMessage(`{}`)
	}
	var obj map[string]any
	if err := json.Unmarshal(content, &obj); err != nil || obj == nil {
		return fmt.Errorf("%w: the answer's content is a JSON object of the form's fields", ErrWrongAnswer)
	}
	if len(schema) == 0 {
		if len(obj) > 0 {
			return fmt.Errorf("%w: the question asks for no fields; accept with no content, or decline", ErrWrongAnswer)
		}
		return nil
	}
	r, err := elicitSchema(schema)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrWrongAnswer, err)
	}
	if err := r.Validate(obj); err != nil {
		return fmt.Errorf("%w: it does not fit the form (%s): %v", ErrWrongAnswer, describeFields(schema), err)
	}
	return nil
}

type formField struct {
	name string
	typ  string
}

// soleField returns the form's field if it has exactly one.
func soleField(schema json.RawMessage) (formField, bool) {
	var s struct {
		Properties map[string]struct {
			Type string `json:"type"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) != 1 {
		return formField{}, false
	}
	for name, p := range s.Properties {
		return formField{name: name, typ: p.Type}, true
	}
	return formField{}, false
}

// fieldValue reads the value of a form's only field from a JSON value, or
// failing that from text.
func fieldValue(f formField, value json.RawMessage, text string) (any, error) {
	var v any
	if len(value) > 0 && json.Unmarshal(value, &v) == nil {
		return v, nil
	}
	text = strings.TrimSpace(text)
	switch f.typ {
	case "number", "integer":
		n, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: %s is a number, not %q", ErrWrongAnswer, f.name, text)
		}
		return n, nil
	case "boolean":
		b, err := strconv.ParseBool(text)
		if err != nil {
			return nil, fmt.Errorf("%w: %s is true or false, not %q", ErrWrongAnswer, f.name, text)
		}
		return b, nil
	}
	return text, nil
}

// describeFields names a form's fields and what each takes, for an error.
func describeFields(schema json.RawMessage) string {
	var s struct {
		Properties map[string]struct {
			Type string `json:"type"`
			Enum []any  `json:"enum"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if json.Unmarshal(schema, &s) != nil || len(s.Properties) == 0 {
		return "no fields"
	}
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, name := range names {
		p := s.Properties[name]
		d := name + " (" + p.Type
		if len(p.Enum) > 0 {
			vals := make([]string, len(p.Enum))
			for j, v := range p.Enum {
				vals[j] = fmt.Sprint(v)
			}
			d += ": one of " + strings.Join(vals, ", ")
		}
		if slices.Contains(s.Required, name) {
			d += ", required"
		}
		parts[i] = d + ")"
	}
	return strings.Join(parts, "; ")
}
