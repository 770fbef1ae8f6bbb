package belay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// Questions to a person and results from outside, on the wait primitive:
// the model asks a person of a role with the built-in ask_person tool, or
// calls a Deferred tool whose result another system posts. Either way the
// run persists a wait bound to the call and lets go; Operator.PostResult
// (POST /v1/runs/{id}/results/{call}) answers it, and the answer is the
// call's result. Past its time the model reads the stated default.

// AskPersonTool is the name of the built-in tool an agent with People
// offers its model.
const AskPersonTool = "ask_person"

// DefaultPersonTimeout is how long a question waits for a person, and a
// deferred call for its result, unless the agent says otherwise.
const DefaultPersonTimeout = 4 * time.Hour

// DefaultNoAnswer is what the model reads when no person answered in time,
// unless the agent says otherwise.
const DefaultNoAnswer = "Go on without the answer: do only what is safe without it, tell the customer a person will follow up, and escalate if it matters."

// People lets an agent's runs ask a person a question and wait for the
// answer.
type People struct {
	// Timeout is how long a question waits. Default DefaultPersonTimeout.
	Timeout time.Duration
	// Default is what the model is told to do when nobody answered in
	// time, after "No one answered within ...". Default DefaultNoAnswer.
	Default string
}

// Deferred configures a tool whose result comes from outside.
type Deferred struct {
	// Timeout is how long a call waits for its result; past it the model
	// reads an is_error result that says none came. Default
	// DefaultPersonTimeout.
	Timeout time.Duration
}

func (d *Deferred) prepare(tool string) error {
	if d == nil {
		return nil
	}
	if d.Timeout < 0 {
		return fmt.Errorf("tool %q: Deferred.Timeout %v is negative", tool, d.Timeout)
	}
	if d.Timeout == 0 {
		d.Timeout = DefaultPersonTimeout
	}
	return nil
}

var askPersonSpec = model.ToolSpec{
	Name: AskPersonTool,
	Description: "Ask a person of the team a question and wait for the answer, which is this tool's result. " +
		"Use it for a decision or a fact only a person can give. Give choices when the answer is one of a few.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{` +
		`"question":{"type":"string","description":"The question, as the person will read it."},` +
		`"choices":{"type":"array","items":{"type":"string"},"description":"The answers allowed, if the answer is one of them."},` +
		`"role":{"type":"string","enum":["approver","operator","admin"],"description":"Who may answer. Default approver."}},` +
		`"required":["question"],"additionalProperties":false}`),
}

// prepareQuestions checks an agent's People settings and fills defaults.
func (a *Agent) preparePeople() error {
	p := a.People
	if p == nil {
		return nil
	}
	if p.Timeout < 0 {
		return fmt.Errorf("agent %q: People.Timeout %v is negative", a.Name, p.Timeout)
	}
	if p.Timeout == 0 {
		p.Timeout = DefaultPersonTimeout
	}
	if p.Default == "" {
		p.Default = DefaultNoAnswer
	}
	for _, t := range a.Tools {
		if t.Name == AskPersonTool {
			return fmt.Errorf("agent %q: a tool is named %q, the built-in tool of questions to people; rename it", a.Name, AskPersonTool)
		}
	}
	return nil
}

// personQuestion is the arguments of an ask_person call.
type personQuestion struct {
	Question string     `json:"question"`
	Choices  []string   `json:"choices,omitempty"`
	Role     store.Role `json:"role"`
}

func parsePersonQuestion(raw json.RawMessage) (personQuestion, error) {
	var in personQuestion
	if err := json.Unmarshal(raw, &in); err != nil {
		return personQuestion{}, fmt.Errorf(`ask_person takes {"question": "...", "choices": [...], "role": "approver"}: %v`, err)
	}
	if strings.TrimSpace(in.Question) == "" {
		return personQuestion{}, errors.New(`ask_person needs a question: {"question": "..."}`)
	}
	switch in.Role {
	case "":
		in.Role = store.RoleApprover
	case store.RoleApprover, store.RoleOperator, store.RoleAdmin:
	default:
		return personQuestion{}, fmt.Errorf("ask_person: role %q; want approver, operator or admin", in.Role)
	}
	return in, nil
}

// resultAnswer is how a deferred call's posted result is kept on its wait.
type resultAnswer struct {
	Result  json.RawMessage `json:"result"`
	IsError bool            `json:"is_error,omitempty"`
}

// Result is the answer to a call that waits: a person's answer to an
// ask_person question, or a deferred tool's result.
type Result struct {
	// Value is the result, JSON. A person's answer is a JSON string, one
	// of the question's choices if it has some.
	Value json.RawMessage
	// IsError marks a deferred call's result as a failure the model reads
	// as such.
	IsError bool
	// By names who answered: "human:<id>" or "system:<name>". Required.
	By string
	// Roles are the answerer's roles; a question is answered only by a
	// person of its role. Empty: trusted code (the CLI), which may answer
	// any.
	Roles []store.Role
	// Binding, if set, must be the wait's: an answer made for a call that
	// has since changed does nothing.
	Binding string
	// Key, if set, makes the answer idempotent.
	Key string
}

// ErrWrongAnswer is returned for a person's answer that is not a string,
// or not one of the question's choices; the message says which.
var ErrWrongAnswer = errors.New("the answer does not fit the question")

// ErrNotYourQuestion is returned when the answerer lacks the role the
// question is for.
var ErrNotYourQuestion = errors.New("the question is for another role")

// PostResult answers the call callID (its tool_use id) of a run that waits
// for it: a person's answer to ask_person, or a deferred tool's result. The
// run is queued once nothing of it waits any more. A run of another tenant
// is store.ErrNotFound; a call that waits for no such answer (none, or a
// reply or an event, which Say and Signal send) is store.ErrNotWaiting; a
// late answer is store.ErrWaitExpired.
func (op *Operator) PostResult(ctx context.Context, tenant, runID, callID string, r Result) (Said, error) {
	ws, ok := op.store.(store.Waiter)
	if !ok {
		return Said{}, ErrWaitsUnsupported
	}
	if r.By == "" {
		return Said{}, errors.New("post result: a result records who gave it (By: human:<id> or system:<name>)")
	}
	run, err := op.store.GetRun(ctx, tenant, runID)
	if err != nil {
		return Said{}, fmt.Errorf("post result: %w", err)
	}
	waits, err := ws.Waits(ctx, store.ListWaitsParams{Tenant: run.Tenant, RunID: run.ID})
	if err != nil {
		return Said{}, fmt.Errorf("post result: %w", err)
	}
	i := slices.IndexFunc(waits, func(w store.Wait) bool { return w.ToolUseID == callID })
	if i < 0 || (waits[i].Kind != store.WaitPerson && waits[i].Kind != store.WaitResult) {
		return Said{}, fmt.Errorf("post result: %w: no call %s of run %s waits for a result (a reply to the user goes to messages, an event to signals)",
			store.ErrNotWaiting, callID, run.ID)
	}
	w := waits[i]
	var answer []byte
	if q, ok := readElicitPrompt(w); ok {
		if len(r.Roles) > 0 && q.Role != "" && !slices.Contains(r.Roles, q.Role) {
			return Said{}, fmt.Errorf("post result: %w: only a person with the role %s answers it", ErrNotYourQuestion, q.Role)
		}
		if answer, err = elicitAnswerOf(q, r.Value, ""); err != nil {
			return Said{}, fmt.Errorf("post result: %w", err)
		}
	} else if w.Kind == store.WaitPerson {
		var q personQuestion
		_ = json.Unmarshal(w.Prompt, &q)
		if len(r.Roles) > 0 && !slices.Contains(r.Roles, q.Role) {
			return Said{}, fmt.Errorf("post result: %w: only a person with the role %s answers it", ErrNotYourQuestion, q.Role)
		}
		var text string
		if err := json.Unmarshal(r.Value, &text); err != nil || strings.TrimSpace(text) == "" {
			return Said{}, fmt.Errorf("post result: %w: a person's answer is a JSON string, not empty", ErrWrongAnswer)
		}
		if len(q.Choices) > 0 && !slices.Contains(q.Choices, text) {
			return Said{}, fmt.Errorf("post result: %w: %q is not among the choices %q", ErrWrongAnswer, text, q.Choices)
		}
		answer, _ = json.Marshal(replyAnswer{Text: text})
	} else {
		if !json.Valid(r.Value) {
			return Said{}, fmt.Errorf("post result: %w: the result is not JSON", ErrWrongAnswer)
		}
		answer, _ = json.Marshal(resultAnswer{Result: r.Value, IsError: r.IsError})
	}
	said, err := op.answerWait(ctx, ws, run, w, answer, r.By, r.Key, r.Binding)
	if err != nil {
		return Said{}, fmt.Errorf("post result: %w", err)
	}
	return said, nil
}
