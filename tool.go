package belay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/belayrun/belay/store"
	"github.com/google/jsonschema-go/jsonschema"
)

// EffectClass says what a tool does to the world. It decides how the runtime
// treats a call: reads run freely and may be retried; writes and
// irreversible calls go through the idempotency ledger.
type EffectClass string

const (
	// Read tools change nothing; calling them twice is harmless.
	Read EffectClass = "read"
	// Write tools change state that can be changed back.
	Write EffectClass = "write"
	// Irreversible tools change what cannot be undone: money, deletion,
	// anything a customer sees.
	Irreversible EffectClass = "irreversible"
)

// SideEffecting reports whether calls of this class go through the ledger.
func (c EffectClass) SideEffecting() bool { return c == Write || c == Irreversible }

// DefaultToolTimeout bounds a tool call that sets no Timeout.
const DefaultToolTimeout = 30 * time.Second

// Tool is something the model can call.
//
// Build one with NewTool from a typed Go function, or fill the struct
// directly when the arguments are already JSON.
type Tool struct {
	// Name is how the model calls the tool. Required.
	Name string
	// Description tells the model what the tool does and when to use it.
	Description string
	// InputSchema is the JSON Schema of the arguments. NewTool derives it.
	InputSchema json.RawMessage
	// Effect is the tool's effect class. Default Read.
	Effect EffectClass
	// External marks a tool whose effect reaches a customer (an email, a
	// message). The default policy gates it like an irreversible one.
	External bool
	// KeyFields name the arguments that identify the intent of a
	// side-effecting call (say charge_id and amount for a refund). The
	// idempotency key is derived from the run, the tool and these fields, so
	// the same intent asked again under a new tool_use id maps to the same
	// key. Default: all arguments.
	KeyFields []string
	// Scope says which runs share the intent of a side-effecting call.
	// ScopeTenant (with KeyFields, say charge_id) derives the key without
	// the run, so a second run asking for the same refund of the same
	// charge gets the first run's recorded result, never a second call.
	// Default ScopeRun.
	Scope EffectScope
	// HonorsKey declares that the downstream system deduplicates by the
	// idempotency key the tool passes on, so calling again under the same key
	// cannot apply the effect twice.
	HonorsKey bool
	// Sensitive names the arguments whose values are secrets (a card number,
	// a password): the model and the call see them, but traces, escalation
	// packets, approval cards, API responses, the CLI and logs show Redacted.
	// Top-level fields of the arguments object. A run records them when it
	// starts, so readers without the agent's code redact them too. For a
	// tool with sensitive fields, the value of a field its InputSchema does
	// not declare is hidden as well (a sensitive one misspelled), arguments
	// that are not a JSON object are hidden whole, and an argument error
	// says where and why a call does not fit the schema, never with what.
	Sensitive []string
	// Timeout bounds one attempt. Default DefaultToolTimeout.
	Timeout time.Duration
	// Retry says how transient failures are retried. Zero fields take
	// RetryPolicy's defaults.
	Retry RetryPolicy
	// Breaker configures the tool's circuit breaker. Zero fields take
	// BreakerPolicy's defaults.
	Breaker BreakerPolicy
	// Deferred, if set, makes the tool's result come from outside: Belay
	// records the call (after the policy allowed it), the run waits, and
	// another system posts the result (Operator.PostResult, POST
	// /v1/runs/{id}/results/{call}). Call is then not used. Default nil.
	Deferred *Deferred

	// Call performs the call with arguments already validated against
	// InputSchema. Its result must be JSON. Required.
	Call func(ctx context.Context, args json.RawMessage) (json.RawMessage, error)
	// Summarize says in plain words what a call does, for the person asked
	// to approve it: "Refund 288.00 USD on charge CH-2". Default: the tool
	// name and its arguments.
	Summarize func(args json.RawMessage) string
	// NewFact says whether a result puts a new fact in the run, for loop
	// detection: a poll whose status changed is progress, one returning the
	// same status is not. Default: a side effect applied, or a result not
	// seen before in the run. Optional.
	NewFact func(args, result json.RawMessage) bool
	// Reconcile asks the downstream system whether the effect under key
	// happened, when a call's outcome is unknown. It returns the result and
	// found true if it did. Optional. A tool built by NewTool declares it
	// in its own types with WithReconcile.
	Reconcile func(ctx context.Context, key string, args json.RawMessage) (result json.RawMessage, found bool, err error)

	schema *jsonschema.Resolved
	// schemaDoc is InputSchema decoded, and declared the top-level fields
	// it declares: what an argument error of a sensitive tool is built from.
	schemaDoc any
	declared  []string
}

// NewTool builds a tool from a typed function. The input schema is derived
// from In; arguments that do not match it are returned to the model as an
// error result and fn is not called. Options set up the rest of the tool in
// the same types (WithReconcile); the Tool's fields can be set afterwards
// too.
func NewTool[In, Out any](name, description string, effect EffectClass, fn func(ctx context.Context, in In) (Out, error), opts ...ToolOption[In, Out]) Tool {
	t := Tool{Name: name, Description: description, Effect: effect}
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("belay: tool %q: derive input schema: %v", name, err))
	}
	raw, err := json.Marshal(schema)
	if err != nil {
		panic(fmt.Sprintf("belay: tool %q: encode input schema: %v", name, err))
	}
	t.InputSchema = raw
	t.Call = func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
		var in In
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, &ArgumentError{Tool: name, Err: decodeError(err)}
		}
		out, err := fn(ctx, in)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
	for _, opt := range opts {
		opt(&t)
	}
	return t
}

// ToolOption sets up a tool that NewTool builds, in the types of the tool's
// function: an option for a tool of other types does not compile.
type ToolOption[In, Out any] func(*Tool)

// WithReconcile sets the tool's Reconcile from a typed function: find is
// given the call's idempotency key and its arguments as In, asks the
// downstream system whether the effect happened under that key, and
// returns what the call returned, with found true, if it did.
func WithReconcile[In, Out any](find func(ctx context.Context, key string, in In) (result Out, found bool, err error)) ToolOption[In, Out] {
	return func(t *Tool) {
		name := t.Name
		t.Reconcile = func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, bool, error) {
			var in In
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, false, &ArgumentError{Tool: name, Err: decodeError(err)}
			}
			out, found, err := find(ctx, key, in)
			if err != nil || !found {
				return nil, false, err
			}
			result, err := json.Marshal(out)
			if err != nil {
				return nil, false, fmt.Errorf("reconcile %s: encode the result: %w", name, err)
			}
			return result, true, nil
		}
	}
}

// decodeError is what the model reads when valid arguments do not decode
// into a tool's input type (a number too large for its field). Go's message
// quotes the number; which of a tool's fields are sensitive is not known
// here, so it is left out for all.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err
	}
	kind, _, _ := strings.Cut(te.Value, " ")
	if te.Field == "" {
		return fmt.Errorf("the arguments: a JSON %s does not fit Go type %s", kind, te.Type)
	}
	return fmt.Errorf("%s: a JSON %s does not fit Go type %s", te.Field, kind, te.Type)
}

// validate checks the definition and resolves its schema once.
func (t *Tool) validate() error {
	if t.Name == "" {
		return errors.New("tool without a name")
	}
	if t.Call == nil && t.Deferred == nil {
		return fmt.Errorf("tool %q has no Call", t.Name)
	}
	if err := t.Deferred.prepare(t.Name); err != nil {
		return err
	}
	switch t.Effect {
	case "":
		t.Effect = Read
	case Read, Write, Irreversible:
	default:
		return fmt.Errorf("tool %q: unknown effect class %q (want read, write or irreversible)", t.Name, t.Effect)
	}
	if err := t.checkScope(); err != nil {
		return err
	}
	if t.Timeout == 0 {
		t.Timeout = DefaultToolTimeout
	}
	t.Retry.applyDefaults()
	t.Breaker.applyDefaults()
	if len(t.InputSchema) == 0 {
		t.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(t.InputSchema, &s); err != nil {
		return fmt.Errorf("tool %q: input schema: %w", t.Name, err)
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		return fmt.Errorf("tool %q: input schema: %w", t.Name, err)
	}
	t.schema = resolved
	if err := json.Unmarshal(t.InputSchema, &t.schemaDoc); err != nil {
		return fmt.Errorf("tool %q: input schema: %w", t.Name, err)
	}
	t.declared = nil
	if doc, ok := t.schemaDoc.(map[string]any); ok {
		if props, ok := doc["properties"].(map[string]any); ok {
			for p := range props {
				t.declared = append(t.declared, p)
			}
			slices.Sort(t.declared)
		}
	}
	return nil
}

// sensitiveArgs is what a run records of the tool's secrets.
func (t *Tool) sensitiveArgs() store.SensitiveArgs {
	if t == nil || len(t.Sensitive) == 0 {
		return store.SensitiveArgs{}
	}
	return store.SensitiveArgs{Fields: slices.Clone(t.Sensitive), Declared: slices.Clone(t.declared)}
}

// checkArgs validates arguments from the model against the tool's schema.
// The error of a tool with sensitive fields holds no value of the call: it
// becomes the call's result, which is stored and shown.
func (t *Tool) checkArgs(args json.RawMessage) error {
	var instance any
	if err := json.Unmarshal(args, &instance); err != nil {
		if len(t.Sensitive) > 0 {
			return &ArgumentError{Tool: t.Name, Err: secretSyntaxError(err)}
		}
		return &ArgumentError{Tool: t.Name, Err: fmt.Errorf("arguments are not valid JSON: %w", err)}
	}
	if t.schema == nil {
		return nil
	}
	if err := t.schema.Validate(instance); err != nil {
		if len(t.Sensitive) > 0 {
			err = secretSchemaError(err, t.schemaDoc)
		}
		return &ArgumentError{Tool: t.Name, Err: err}
	}
	return nil
}

// ArgumentError is returned to the model when its arguments do not fit the
// tool. The model fixes them; the runtime never retries.
type ArgumentError struct {
	Tool string
	Err  error
}

func (e *ArgumentError) Error() string {
	return fmt.Sprintf("invalid arguments for %s: %v", e.Tool, e.Err)
}

func (e *ArgumentError) Unwrap() error { return e.Err }

// CallInfo describes the tool call in progress. Tools read it with
// CallInfoFrom to pass the idempotency key downstream.
type CallInfo struct {
	RunID  string
	Tenant string
	Step   int
	// ToolUseID is the model's id for this call. It changes when the model
	// asks again; never use it as an idempotency key.
	ToolUseID string
	// IdempotencyKey is the business-level key of a side-effecting call;
	// empty for reads. Pass it to downstream systems that honour keys.
	IdempotencyKey string
	// Attempt counts calls under this key, from 1, across workers: each is
	// recorded in the ledger before it is sent.
	Attempt int
	// FencingToken is the lease epoch the call is made under. It grows each
	// time a worker claims the run, so a downstream that keeps the highest
	// token it has seen for a key (or a run) and refuses a lower one refuses
	// the late call of a worker that lost the run: one stopped (SIGSTOP, a
	// paused VM) or cut off from the store between its last check and its
	// send, which nothing inside that worker can prevent.
	FencingToken int64
	// Deadline is the latest moment the call may act, as it stood when the
	// call began: its timeout, or the end of the worker's lease if sooner.
	// The context's Deadline is the live one (the lease moves forward with
	// each renewal), and its Err reports the lease's end as soon as it
	// passes: check ctx.Err() immediately before sending.
	Deadline time.Time
}

type callInfoKey struct{}

// CallInfoFrom returns the call a tool is serving.
func CallInfoFrom(ctx context.Context) (CallInfo, bool) {
	ci, ok := ctx.Value(callInfoKey{}).(CallInfo)
	return ci, ok
}

func withCallInfo(ctx context.Context, ci CallInfo) context.Context {
	return context.WithValue(ctx, callInfoKey{}, ci)
}
