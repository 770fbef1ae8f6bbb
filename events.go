package belay

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// Named events: a run that waits for something another system sends it
// ("payment_settled"). The model waits with the built-in wait_for_event
// tool; the run persists a wait of the event's name and lets go, as for a
// question to its user (conversation.go). Operator.Signal (the API's POST
// /v1/runs/{id}/signals) sends the event: it answers the wait, whose
// payload is the tool's result, or is kept by the run until it waits, so
// an event that comes first is not lost.

// WaitForEventTool is the name of the built-in tool an agent with Events
// offers its model.
const WaitForEventTool = "wait_for_event"

// DefaultEventTimeout is how long a run waits for an event unless the
// agent says otherwise.
const DefaultEventTimeout = 24 * time.Hour

// Events lets an agent's runs wait for named events sent to them.
type Events struct {
	// Timeout is how long a run waits for an event. Past it the model is
	// told, as the call's is_error result, that none came, and goes on.
	// Default DefaultEventTimeout.
	Timeout time.Duration
}

// MaxEventPayloadBytes bounds an event's payload.
const MaxEventPayloadBytes = 64 << 10

// eventName is what an event's name may hold.
var eventName = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,200}$`)

var waitForEventSpec = model.ToolSpec{
	Name: WaitForEventTool,
	Description: "Wait for a named event another system sends this run (for example payment_settled), and get its payload as this tool's result. " +
		"The run waits, for hours if need be; an event that came before you wait is kept for you.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"name":{"type":"string","description":"The event's name, as the system that sends it names it."}},"required":["name"],"additionalProperties":false}`),
}

// prepareEvents checks an agent's event settings and fills their defaults.
func (a *Agent) prepareEvents() error {
	e := a.Events
	if e == nil {
		return nil
	}
	if e.Timeout < 0 {
		return fmt.Errorf("agent %q: Events.Timeout %v is negative", a.Name, e.Timeout)
	}
	if e.Timeout == 0 {
		e.Timeout = DefaultEventTimeout
	}
	for _, t := range a.Tools {
		if t.Name == WaitForEventTool {
			return fmt.Errorf("agent %q: a tool is named %q, the built-in tool of events; rename it", a.Name, WaitForEventTool)
		}
	}
	return nil
}

// eventWaitInput is the arguments of a wait_for_event call.
type eventWaitInput struct {
	Name string `json:"name"`
}

func parseEventWait(raw json.RawMessage) (eventWaitInput, error) {
	var in eventWaitInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return eventWaitInput{}, fmt.Errorf(`wait_for_event takes {"name": "..."}: %v`, err)
	}
	if !eventName.MatchString(in.Name) {
		return eventWaitInput{}, fmt.Errorf(`wait_for_event needs the event's name: 1-200 letters, digits or . _ : -, as {"name": "payment_settled"}`)
	}
	return in, nil
}

// Event is a named event sent to a run.
type Event struct {
	// Name says what happened: 1-200 letters, digits or . _ : -. Required.
	Name string
	// Payload is the event's data, a JSON value the model reads as the
	// result of its wait. Default {}.
	Payload json.RawMessage
	// Key, if set, makes the event idempotent: sent again with the same
	// key, name and payload it changes nothing.
	Key string
}

// Sent is what became of an event.
type Sent struct {
	Signal store.Signal
	// Repeated reports an event sent again under its key: it changed
	// nothing.
	Repeated bool
}

// ErrInvalidEvent is returned for an event whose name or payload is not
// one; the message says what is wrong.
var ErrInvalidEvent = errors.New("invalid event")

// Signal sends a named event to a run. If the run waits for an event of
// that name, the event answers the wait and the run is queued; if not, the
// run keeps it, and its next wait for that name takes it at once. A run of
// another tenant is store.ErrNotFound; a run that has ended is
// store.ErrNotWaiting.
func (op *Operator) Signal(ctx context.Context, tenant, runID string, e Event) (Sent, error) {
	ws, ok := op.store.(store.Waiter)
	if !ok {
		return Sent{}, ErrWaitsUnsupported
	}
	if !eventName.MatchString(e.Name) {
		return Sent{}, fmt.Errorf("signal: %w: the name %q is not 1-200 letters, digits or . _ : -", ErrInvalidEvent, e.Name)
	}
	if len(bytes.TrimSpace(e.Payload)) == 0 {
		e.Payload = json.RawMessage(`{}`)
	}
	if !json.Valid(e.Payload) {
		return Sent{}, fmt.Errorf("signal: %w: the payload is not JSON", ErrInvalidEvent)
	}
	if len(e.Payload) > MaxEventPayloadBytes {
		return Sent{}, fmt.Errorf("signal: %w: the payload is %d bytes, more than %d", ErrInvalidEvent, len(e.Payload), MaxEventPayloadBytes)
	}
	sig, repeated, err := ws.Signal(ctx, store.SignalParams{Tenant: tenant, RunID: runID, ID: newSignalID(), Name: e.Name,
		Key: e.Key, Payload: e.Payload, Now: op.now()})
	if err != nil {
		return Sent{}, fmt.Errorf("signal: %w", err)
	}
	if !repeated && sig.ConsumedBy != "" {
		op.done()
	}
	return Sent{Signal: sig, Repeated: repeated}, nil
}

func newSignalID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "sg_" + hex.EncodeToString(b[:])
}
