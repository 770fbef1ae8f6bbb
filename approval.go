package belay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/belayrun/belay/internal/redact"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// Decisions of people on pending approvals, and their expiry: the API a
// person (the console, belay approve, Runtime.Decide) uses. The engine's
// side, which asks and applies, is gate.go's.

// DefaultApprovalTTL is how long a person has to decide an approval.
const DefaultApprovalTTL = 4 * time.Hour

// ApprovalChoice is what a person decides on a pending approval. (What a
// policy decides about a call is a Verdict.)
type ApprovalChoice string

const (
	// Approve lets the call run as the model asked for it.
	Approve ApprovalChoice = "approve"
	// Edit lets the call run with the arguments the decision changes.
	Edit ApprovalChoice = "edit"
	// Reject refuses the call; the model reads the decision's note.
	Reject ApprovalChoice = "reject"
)

// ApprovalDecision is a person's decision on a pending approval.
type ApprovalDecision struct {
	// Choice is Approve, Edit or Reject.
	Choice ApprovalChoice
	// Verdict is the choice as a bare string, read when Choice is empty.
	//
	// Deprecated: set Choice.
	Verdict string
	// EditedArgs, for an edit, are the arguments to change: a JSON object
	// merged into the call's arguments. Each of its top-level fields
	// replaces the call's field of that name (a nested object or array is
	// replaced whole, not merged), a field given as null is removed from
	// the call, and the fields it does not name keep their values. The
	// merged call must fit the tool's input schema, and must differ from
	// the one asked for (else approve it). The approval records the merged
	// arguments beside the original ones.
	EditedArgs json.RawMessage
	// Note says why; it reaches the model on a rejection.
	Note string
	// By names who decided: "human:<id>" or "policy:<name>". A run's
	// requester (RunRequest.RequestedBy) may not decide its approvals
	// unless the policy's decision allows self-approval.
	By string
	// Binding, when set, must equal the approval's binding: a decision made
	// on a card that has since changed (other arguments, policy or expiry)
	// does nothing.
	Binding string
}

// ErrApprovalNotFound is returned for an approval id unknown in the tenant.
var ErrApprovalNotFound = errors.New("approval not found")

// ErrInvalidEdit is returned when edited arguments are not a valid call of
// the tool; the message says what is wrong.
var ErrInvalidEdit = errors.New("edited arguments are not a valid call")

// ErrSelfApproval is returned when the person who requested a run tries to
// decide one of its approvals and the policy does not allow it.
var ErrSelfApproval = errors.New("the requester of a run cannot decide its approvals")

// DecideApproval is Operator.Decide over a bare store.
//
// Deprecated: use NewOperator(s).Decide.
func DecideApproval(ctx context.Context, s store.Store, tenant, id string, d ApprovalDecision) (store.Approval, error) {
	return NewOperator(s).Decide(ctx, tenant, id, d)
}

// Decide is Operator.Decide on the runtime's operator.
//
// Deprecated: use rt.Operator().Decide.
func (r *Runtime) Decide(ctx context.Context, tenant, id string, d ApprovalDecision) (store.Approval, error) {
	return r.Operator().Decide(ctx, tenant, id, d)
}

// Decide records a person's decision on a pending approval. An operator
// that knows the agents (a runtime's) checks edited arguments against the
// tool's input schema at once; one over a bare store leaves that to the
// call, which refuses them then if they do not fit. Sensitive fields an
// editor left as Redacted keep their original values. When the last
// pending decision of the run's turn is taken, the run is queued and any
// worker executes the turn.
func (op *Operator) Decide(ctx context.Context, tenant, id string, d ApprovalDecision) (store.Approval, error) {
	a, err := op.decide(ctx, tenant, id, d)
	if err != nil {
		return store.Approval{}, err
	}
	op.done()
	return a, nil
}

// decide checks a decision and records it. Edited arguments are checked
// against the tool's schema where the operator knows the agents.
func (op *Operator) decide(ctx context.Context, tenant, id string, d ApprovalDecision) (store.Approval, error) {
	s, now := op.store, op.now()
	a, err := s.GetApproval(ctx, tenant, id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Approval{}, fmt.Errorf("%w: %s", ErrApprovalNotFound, id)
	}
	if err != nil {
		return store.Approval{}, err
	}
	if d.By == "" {
		return store.Approval{}, errors.New("decide: a decision records who took it (By: human:<id> or policy:<name>)")
	}
	run, err := s.GetRun(ctx, a.Tenant, a.RunID)
	if err != nil {
		return store.Approval{}, err
	}
	if run.RequestedBy != "" && run.RequestedBy == d.By && !a.SelfApproval {
		return store.Approval{}, fmt.Errorf("%w: %s requested run %s; another approver decides %s", ErrSelfApproval, d.By, run.ID, a.ID)
	}
	if d.Binding != "" && d.Binding != a.Binding {
		return store.Approval{}, fmt.Errorf("decide %s: %w", a.ID, store.ErrBindingMismatch)
	}
	choice, err := d.choice()
	if err != nil {
		return store.Approval{}, err
	}
	tool := op.tool(run, a.Tool)
	p := store.DecideParams{Tenant: a.Tenant, ID: a.ID, Binding: a.Binding, By: d.By, Note: d.Note, Now: now}
	switch choice {
	case Approve:
		p.Status = store.ApprovalApproved
	case Reject:
		p.Status = store.ApprovalRejected
	case Edit:
		// The approval keeps the call redacted, and so does the merge: a
		// hidden value the edit does not name (or leaves as Redacted)
		// stays the marker in the store and is put back from the call
		// when the call runs (applyDecision). The check and the hash are
		// of the call that will run.
		merged, err := mergeEdit(a.Args, d.EditedArgs)
		if err != nil {
			return store.Approval{}, fmt.Errorf("decide: %w: %w", ErrInvalidEdit, err)
		}
		original, err := approvedCall(ctx, s, a)
		if err != nil {
			return store.Approval{}, err
		}
		restored := redact.Restore(merged, original)
		if tool != nil {
			if err := tool.checkArgs(restored); err != nil {
				return store.Approval{}, fmt.Errorf("decide: %w: %w", ErrInvalidEdit, err)
			}
		}
		hash, err := argsHash(restored)
		if err != nil {
			return store.Approval{}, fmt.Errorf("decide: %w: %w", ErrInvalidEdit, err)
		}
		if hash == a.ArgsHash {
			return store.Approval{}, fmt.Errorf("decide: %w: the edit changes no argument; approve the call instead", ErrInvalidEdit)
		}
		p.Status, p.EditedArgs, p.EditedHash = store.ApprovalEdited, merged, hash
	}
	var shownEdit json.RawMessage
	switch {
	case p.EditedArgs == nil:
	case tool != nil:
		shownEdit = tool.redact(redact.Args(run.Sensitive[a.Tool], p.EditedArgs))
	default:
		// The CLI decides without the agent's code: the run's record says
		// what is secret.
		shownEdit = RedactStoredArgs(run, a.Tool, p.EditedArgs)
	}
	p.Events = []store.Event{event(a.Step, now, store.EventApprovalDecided, store.ApprovalDecidedData{
		ApprovalID: a.ID, Tool: a.Tool, Category: a.Category, Status: p.Status, By: d.By, Note: d.Note,
		EditedArgs: shownEdit, DecisionS: now.Sub(a.CreatedAt).Seconds()})}
	decided, err := s.DecideApproval(ctx, p)
	if err != nil {
		return store.Approval{}, err
	}
	op.observe(run, p.Events)
	return decided, nil
}

// choice is the decision's choice, from Choice or the deprecated Verdict.
func (d ApprovalDecision) choice() (ApprovalChoice, error) {
	c := d.Choice
	switch {
	case c == "":
		c = ApprovalChoice(d.Verdict)
	case d.Verdict != "" && d.Verdict != string(c):
		return "", fmt.Errorf("decide: choice %q and verdict %q differ; set Choice alone (Verdict is deprecated)", c, d.Verdict)
	}
	switch c {
	case Approve, Edit, Reject:
		return c, nil
	case "":
		return "", errors.New("decide: a decision needs a choice: Approve, Edit or Reject")
	}
	return "", fmt.Errorf("decide: choice %q; want approve, edit or reject", c)
}

// mergeEdit merges an edit into a call's arguments, as ApprovalDecision
// says: each top-level field of the edit replaces the call's, null removes
// it, and fields the edit does not name are kept. The call's fields keep
// their order, and fields it did not have follow them, so the record reads
// as the call did. An edit is a JSON object that names each field once.
func mergeEdit(args, edit json.RawMessage) (json.RawMessage, error) {
	changes, err := objectFields(edit)
	if err != nil {
		return nil, fmt.Errorf("the edit %w", err)
	}
	call, err := objectFields(args)
	if err != nil {
		return nil, errors.New("the call's arguments are not a JSON object, so no field of them can be edited")
	}
	for _, c := range changes {
		i := slices.IndexFunc(call, func(f jsonField) bool { return f.name == c.name })
		switch {
		case string(c.value) == "null" && i >= 0:
			call = slices.Delete(call, i, i+1)
		case string(c.value) == "null":
		case i >= 0:
			call[i].value = c.value
		default:
			call = append(call, c)
		}
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range call {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(f.name)
		b.Write(name)
		b.WriteByte(':')
		b.Write(f.value)
	}
	b.WriteByte('}')
	var merged bytes.Buffer
	if err := json.Compact(&merged, b.Bytes()); err != nil {
		return nil, fmt.Errorf("the edit is not valid JSON: %w", err)
	}
	return merged.Bytes(), nil
}

type jsonField struct {
	name  string
	value json.RawMessage
}

// objectFields reads the top-level fields of a JSON object, in order. A
// name given twice is refused, as the API refuses it in a body: which of
// the two was meant cannot be told.
func objectFields(raw json.RawMessage) ([]jsonField, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New(`is not a JSON object: give the fields to change, as {"amount_usd": 100}`)
	}
	var fields []jsonField
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("is not valid JSON: %w", err)
		}
		name := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("is not valid JSON: %w", err)
		}
		if seen[name] {
			return nil, fmt.Errorf("names the field %q twice", name)
		}
		seen[name] = true
		fields = append(fields, jsonField{name, bytes.TrimSpace(v)})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("is not valid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("is not valid JSON: something follows the object")
	}
	return fields, nil
}

// expireApprovals expires the approvals whose time to be decided has passed,
// and tells the observer of each expiry. The expiry is a durable timer: it
// is in the store, so any worker honours it after any restart.
func (op *Operator) expireApprovals(ctx context.Context) (int, error) {
	expired, err := op.store.ExpireDueApprovals(ctx, store.ExpireApprovalsParams{Now: op.now()})
	if err != nil {
		return 0, err
	}
	if op.observer == nil {
		return len(expired), nil
	}
	runs := map[string]store.Run{}
	for _, e := range expired {
		run, ok := runs[e.Approval.RunID]
		if !ok {
			// Named as its other events are, when it can be read; the
			// expiry is committed either way, so it is told either way.
			run, err = op.store.GetRun(ctx, e.Approval.Tenant, e.Approval.RunID)
			if err != nil {
				run = store.Run{ID: e.Approval.RunID, Tenant: e.Approval.Tenant}
			}
			runs[run.ID] = run
		}
		op.observe(run, e.Events)
	}
	return len(expired), nil
}

// approvedCall returns the exact arguments of the call an approval is for:
// the model's tool_use in the run's messages, since the approval keeps them
// redacted. An approval of an older Belay kept them exact.
func approvedCall(ctx context.Context, s store.Store, a store.Approval) (json.RawMessage, error) {
	msgs, err := s.Messages(ctx, a.RunID)
	if err != nil {
		return nil, fmt.Errorf("decide %s: %w", a.ID, err)
	}
	for i := len(msgs) - 1; i >= 0; i-- {
		if model.Role(msgs[i].Role) != model.RoleAssistant {
			continue
		}
		blocks, err := model.DecodeBlocks(msgs[i].Content)
		if err != nil {
			return nil, fmt.Errorf("decide %s: message %d: %w", a.ID, msgs[i].Seq, err)
		}
		for _, b := range model.ToolUses(blocks) {
			if b.ID == a.ToolUseID {
				return b.Input, nil
			}
		}
	}
	return a.Args, nil
}
