package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Waits: the one durable pending record a run waits on for something from
// outside it (the customer's reply to a question, for now), beside the
// approvals a person decides. A wait is bound to its run and the tool call
// that asked, has an expiry, and is answered once; while the run waits it
// is waiting_input and holds no lease. A checkpoint inserts the run's
// waits with the status that makes it wait, in one transaction; an answer
// queues the run once nothing of it is pending any more.

// StatusWaitingInput is the status of a run that waits for an answer from
// outside it (the user's reply to a question); its pending waits say what.
// Like waiting_approval, it holds no lease and is never claimed: an answer,
// or the waits' expiry, queues it.
const StatusWaitingInput Status = "waiting_input"

var (
	// ErrNotWaiting: the run waits for no answer of that kind; it may
	// have been answered already, or never asked.
	ErrNotWaiting = errors.New("the run is not waiting for an answer")
	// ErrWaitExpired: the wait's time ran out before the answer came.
	ErrWaitExpired = errors.New("the wait expired before the answer came")
	// ErrAnswerKeyReused: an idempotency key that answered a wait was sent
	// again with another answer.
	ErrAnswerKeyReused = errors.New("idempotency key reused with a different answer")
)

// WaitKind is what a wait waits for.
type WaitKind string

const (
	// WaitInput: the run's user answers a question the model asked
	// (the ask_user tool).
	WaitInput WaitKind = "input"
	// WaitEvent: a named event is sent to the run (the wait_for_event
	// tool); Name is the event's name.
	WaitEvent WaitKind = "event"
	// WaitPerson: a person of a role answers a question the model asked
	// (the ask_person tool).
	WaitPerson WaitKind = "person"
	// WaitResult: another system posts the result of a deferred tool's
	// call; Name is the tool.
	WaitResult WaitKind = "result"
)

// WaitStatus is where a wait is in its life.
type WaitStatus string

const (
	WaitPending  WaitStatus = "pending"
	WaitAnswered WaitStatus = "answered"
	WaitExpired  WaitStatus = "expired"
	// WaitCanceled: the run was canceled while the wait was pending; the
	// cancel closed it, recording who canceled as AnsweredBy.
	WaitCanceled WaitStatus = "canceled"
)

// Wait is one durable pending record of a run. It is unique per (Tenant,
// RunID, ToolUseID): a step run again finds its wait, and nobody is asked
// twice.
type Wait struct {
	ID        string
	Tenant    string
	RunID     string
	Step      int
	ToolUseID string
	Kind      WaitKind
	// Name is what the run waits on: the tool that asked.
	Name string
	// Prompt is what the run asked: the tool call's arguments.
	Prompt json.RawMessage
	// Binding is the hash of (tenant, run, tool use, kind, expiry) an
	// answer may name to hold only for this wait.
	Binding   string
	Status    WaitStatus
	ExpiresAt time.Time
	CreatedAt time.Time
	// Answer is the answer's JSON; AnswerKey the idempotency key it came
	// with, if any.
	Answer     json.RawMessage
	AnswerKey  string
	AnsweredBy string
	AnsweredAt time.Time
}

// ListWaitsParams filters waits. Zero fields do not filter.
type ListWaitsParams struct {
	Tenant string
	RunID  string
	Status WaitStatus
	// Kinds keeps the waits of these kinds.
	Kinds []WaitKind
	// After is the id of the wait the page starts after, in creation
	// order: the last of the page before.
	After string
	Limit int
}

// KindList is p.Kinds as the drivers' queries take it: the kinds between
// commas (",person,result,"), or "" for every kind.
func (p ListWaitsParams) KindList() string {
	if len(p.Kinds) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString(",")
	for _, k := range p.Kinds {
		b.WriteString(string(k))
		b.WriteString(",")
	}
	return b.String()
}

// AnswerWaitParams answers a pending wait of a run. The run goes back to
// the queue when nothing of it is pending any more.
type AnswerWaitParams struct {
	Tenant string
	RunID  string
	// ID names the wait; empty answers the run's oldest pending wait of
	// Kind.
	ID   string
	Kind WaitKind
	// Binding, if not empty, must equal the wait's.
	Binding string
	// Key, if not empty, makes the answer idempotent: the same key with
	// the same answer returns the wait it answered and changes nothing;
	// with another answer, ErrAnswerKeyReused.
	Key    string
	Answer json.RawMessage
	By     string
	Now    time.Time
	// Events are appended to the run's trace in the same transaction.
	Events []Event
}

// ExpireWaitsParams expires the waits still pending at Now whose expiry
// has passed.
type ExpireWaitsParams struct {
	Now time.Time
}

// ExpiredWait is one wait ExpireDueWaits expired, and the trace events
// written with it.
type ExpiredWait struct {
	Wait   Wait
	Events []Event
}

// Waiter is a store that keeps waits. Both drivers are; a checkpoint of
// either inserts CheckpointParams.Waits.
type Waiter interface {
	// Waits returns waits in creation order.
	Waits(ctx context.Context, p ListWaitsParams) ([]Wait, error)
	// AnswerWait records the answer to a pending wait once, and queues
	// the run if it is waiting_input and nothing of it is pending any
	// more. A run not in the tenant is ErrNotFound. An answer repeated
	// under its key returns the wait with repeated true. A run that has
	// ended, or has no pending wait of the kind, is ErrNotWaiting, or ErrWaitExpired if its
	// latest one expired; a pending one past its expiry is ErrWaitExpired
	// too, and another binding ErrBindingMismatch.
	AnswerWait(ctx context.Context, p AnswerWaitParams) (w Wait, repeated bool, err error)
	// ExpireDueWaits marks up to 100 pending waits whose expiry has passed
	// as expired, each with its wait_expired event, and queues their runs
	// as AnswerWait does, in one transaction. Call it again while it
	// returns 100.
	ExpireDueWaits(ctx context.Context, p ExpireWaitsParams) ([]ExpiredWait, error)
	// Signal sends a named event to a run, in one transaction: if the run
	// has a pending event wait of that name, the oldest is answered with
	// the payload (and the run queued as AnswerWait does); otherwise the
	// signal is kept, and the checkpoint that inserts such a wait later
	// answers it with the oldest kept signal of its name. A run not in the
	// tenant is ErrNotFound, one that has ended ErrNotWaiting. A signal sent
	// again under its key returns the first with repeated true, or
	// ErrAnswerKeyReused if its name or payload differ.
	Signal(ctx context.Context, p SignalParams) (s Signal, repeated bool, err error)
}

// Signal is one named event sent to a run.
type Signal struct {
	ID      string
	Tenant  string
	RunID   string
	Name    string
	Key     string
	Payload json.RawMessage
	// ConsumedBy is the wait the signal answered; empty while it is kept.
	ConsumedBy string
	CreatedAt  time.Time
}

// SignalParams sends a named event to a run.
type SignalParams struct {
	Tenant string
	RunID  string
	// ID is the new signal's id.
	ID      string
	Name    string
	Key     string
	Payload json.RawMessage
	Now     time.Time
}

// Repeat returns nil if prev, the signal p.Key sent before, had p's name
// and payload. Otherwise ErrAnswerKeyReused.
func (p SignalParams) Repeat(prev Signal) error {
	if prev.Name != p.Name || !sameJSON(prev.Payload, p.Payload) {
		return fmt.Errorf("key %q sent signal %s: %w", p.Key, prev.ID, ErrAnswerKeyReused)
	}
	return nil
}

// Ended is the error of a signal to run, which has ended.
func (p SignalParams) Ended(run Run) error {
	if run.Status == StatusCanceled {
		return fmt.Errorf("%w: the run was canceled", ErrNotWaiting)
	}
	return fmt.Errorf("%w: run %s is %s", ErrNotWaiting, run.ID, run.Status)
}

// EventSignalReceived: a named event reached the run (SignalData). The
// stores write it with the signal.
const EventSignalReceived = "signal_received"

// SignalData is a signal_received event: which signal, and the wait it
// answered, if one waited for it.
type SignalData struct {
	SignalID string `json:"signal_id"`
	Name     string `json:"name"`
	WaitID   string `json:"wait_id,omitempty"`
}

// SignalEvents is the trace of s, which answered the wait waitID ("" if
// it was kept). Every driver writes it, so a signal reads the same
// whichever store took it.
func SignalEvents(s Signal, step int, waitID string, now time.Time) []Event {
	data, _ := json.Marshal(SignalData{SignalID: s.ID, Name: s.Name, WaitID: waitID})
	return []Event{{RunID: s.RunID, Step: step, Type: EventSignalReceived, Time: now, Data: data}}
}

// SignalAnswerer is recorded as who answered a wait with a signal.
const SignalAnswerer = "signal"

// The checks every driver's AnswerWait makes in its transaction, worded
// once.

// Repeat returns nil if prev, the wait p.Key answered before, was answered
// with p's answer: p repeats it. Otherwise ErrAnswerKeyReused.
func (p AnswerWaitParams) Repeat(prev Wait) error {
	if !sameJSON(prev.Answer, p.Answer) {
		return fmt.Errorf("key %q answered wait %s: %w", p.Key, prev.ID, ErrAnswerKeyReused)
	}
	return nil
}

// Check returns why p may not answer cur, the pending wait as p's
// transaction read it, or nil.
func (p AnswerWaitParams) Check(cur Wait) error {
	switch {
	case p.Binding != "" && p.Binding != cur.Binding:
		return ErrBindingMismatch
	case !cur.ExpiresAt.After(p.Now):
		return fmt.Errorf("%w: it expired at %s", ErrWaitExpired, cur.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// NotPending is the error of an answer to run, which has no pending wait
// of p's kind; latest is its latest wait of any status, if found.
func (p AnswerWaitParams) NotPending(run Run, latest Wait, found bool) error {
	if run.Status == StatusCanceled {
		return fmt.Errorf("%w: the run was canceled", ErrNotWaiting)
	}
	if found && latest.Status == WaitExpired {
		return fmt.Errorf("%w: run %s asked at %s and stopped waiting at %s", ErrWaitExpired, run.ID,
			latest.CreatedAt.UTC().Format(time.RFC3339), latest.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return fmt.Errorf("%w: run %s is %s", ErrNotWaiting, run.ID, run.Status)
}

func sameJSON(a, b json.RawMessage) bool {
	var ca, cb bytes.Buffer
	if json.Compact(&ca, a) != nil || json.Compact(&cb, b) != nil {
		return bytes.Equal(a, b)
	}
	return bytes.Equal(ca.Bytes(), cb.Bytes())
}

// Trace events of waits. The engine writes wait_requested with the
// checkpoint that makes the run wait; AnswerWait's caller writes
// wait_answered; the stores write wait_expired.
const (
	// EventWaitRequested: the run waits for an answer (WaitRequestedData).
	EventWaitRequested = "wait_requested"
	// EventWaitAnswered: a wait was answered (WaitAnsweredData).
	EventWaitAnswered = "wait_answered"
	// EventWaitExpired: a wait's time ran out unanswered
	// (WaitExpiredData).
	EventWaitExpired = "wait_expired"
)

// WaitRequestedData is a wait_requested event.
type WaitRequestedData struct {
	WaitID    string          `json:"wait_id"`
	Kind      WaitKind        `json:"kind"`
	Name      string          `json:"name"`
	Prompt    json.RawMessage `json:"prompt"`
	ExpiresAt time.Time       `json:"expires_at"`
}

// WaitAnsweredData is a wait_answered event: which wait, and who answered.
type WaitAnsweredData struct {
	WaitID string   `json:"wait_id"`
	Kind   WaitKind `json:"kind"`
	Name   string   `json:"name"`
	By     string   `json:"by"`
	// WaitedS is how long the run waited, in seconds.
	WaitedS float64 `json:"waited_s"`
}

// WaitExpiredData is a wait_expired event.
type WaitExpiredData struct {
	WaitID string   `json:"wait_id"`
	Kind   WaitKind `json:"kind"`
	Name   string   `json:"name"`
}

// WaitExpirer is recorded as who closed a wait that expired.
const WaitExpirer = "policy:expiry"

// WaitExpiry is the event that records w's expiry at now. Every driver's
// ExpireDueWaits writes it, so that an expiry reads the same whichever
// store wrote it.
func WaitExpiry(w Wait, now time.Time) []Event {
	data, _ := json.Marshal(WaitExpiredData{WaitID: w.ID, Kind: w.Kind, Name: w.Name})
	return []Event{{RunID: w.RunID, Step: w.Step, Type: EventWaitExpired, Time: now, Data: data}}
}
