package belay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/belayrun/belay/store"
)

// The user's side of a conversation: a reply to a run that waits for one
// (Operator.Say), and the expiry of waits nobody answered. The engine's
// side, which asks and reads the reply, is conversation.go's.

// MaxReplyBytes bounds a reply's text.
const MaxReplyBytes = 32 << 10

// ErrWaitsUnsupported is returned by Say on a store that keeps no waits.
var ErrWaitsUnsupported = errors.New("this store keeps no waits: conversations need the SQLite or PostgreSQL store")

// Reply is a user's message to a run that waits for one.
type Reply struct {
	// Text is what the user says. Required, at most MaxReplyBytes.
	Text string
	// Key, if set, makes the reply idempotent: sent again with the same
	// key and text it changes nothing and returns the wait it answered;
	// with another text it is refused (store.ErrAnswerKeyReused).
	Key string
	// By names who replied. Default "user:" and the run's user.
	By string
}

// Said is what became of a reply.
type Said struct {
	// Wait is the wait the reply answered.
	Wait store.Wait
	// Repeated reports a reply sent again under its key: it changed
	// nothing.
	Repeated bool
}

// Say answers the question a run asked its user and queues the run, which
// goes on with the reply as ask_user's result. A run of another tenant is
// store.ErrNotFound; a run that waits for no reply is store.ErrNotWaiting,
// or store.ErrWaitExpired if its conversation ended idle; either says what
// the run is doing.
func (op *Operator) Say(ctx context.Context, tenant, runID string, m Reply) (Said, error) {
	ws, ok := op.store.(store.Waiter)
	if !ok {
		return Said{}, ErrWaitsUnsupported
	}
	if strings.TrimSpace(m.Text) == "" {
		return Said{}, errors.New("say: the reply has no text")
	}
	if len(m.Text) > MaxReplyBytes {
		return Said{}, fmt.Errorf("say: the reply is %d bytes, more than %d; send a shorter one", len(m.Text), MaxReplyBytes)
	}
	run, err := op.store.GetRun(ctx, tenant, runID)
	if err != nil {
		return Said{}, fmt.Errorf("say: %w", err)
	}
	if m.By == "" {
		m.By = "user:" + run.User
	}
	// The answer names the wait it is for, read before: the store answers
	// exactly that one, or refuses.
	pending, err := ws.Waits(ctx, store.ListWaitsParams{Tenant: run.Tenant, RunID: run.ID, Status: store.WaitPending,
		Kinds: []store.WaitKind{store.WaitInput}})
	if err != nil {
		return Said{}, fmt.Errorf("say: %w", err)
	}
	w := store.Wait{Kind: store.WaitInput}
	if len(pending) > 0 {
		w = pending[0]
	}
	answer, _ := json.Marshal(replyAnswer{Text: m.Text})
	if q, ok := readElicitPrompt(w); ok {
		// A tool's question takes the form it asked for.
		if answer, err = elicitAnswerOf(q, json.RawMessage(m.Text), m.Text); err != nil {
			return Said{}, fmt.Errorf("say: %w", err)
		}
	}
	said, err := op.answerWait(ctx, ws, run, w, answer, m.By, m.Key, "")
	if err != nil {
		return Said{}, fmt.Errorf("say: %w", err)
	}
	return said, nil
}

// answerWait answers w, a wait of run, with answer, and tells the observer
// of the answer. A zero w (its ID empty) leaves the store to find the run's
// pending wait of w.Kind, or to refuse saying why there is none.
func (op *Operator) answerWait(ctx context.Context, ws store.Waiter, run store.Run, w store.Wait, answer []byte,
	by, key, binding string) (Said, error) {
	now := op.now()
	p := store.AnswerWaitParams{Tenant: run.Tenant, RunID: run.ID, ID: w.ID, Kind: w.Kind, Binding: binding, Key: key,
		Answer: answer, By: by, Now: now}
	if w.ID != "" {
		p.Events = []store.Event{event(w.Step, now, store.EventWaitAnswered, store.WaitAnsweredData{
			WaitID: w.ID, Kind: w.Kind, Name: w.Name, By: by, WaitedS: now.Sub(w.CreatedAt).Seconds()})}
	}
	answered, repeated, err := ws.AnswerWait(ctx, p)
	if err != nil {
		return Said{}, err
	}
	if !repeated {
		op.observe(run, p.Events)
		op.done()
	}
	return Said{Wait: answered, Repeated: repeated}, nil
}

// PendingWaits lists the waits nobody has answered yet in a tenant
// (AnyTenant for every tenant), oldest first.
func (op *Operator) PendingWaits(ctx context.Context, tenant string) ([]store.Wait, error) {
	ws, ok := op.store.(store.Waiter)
	if !ok {
		return nil, nil
	}
	return ws.Waits(ctx, store.ListWaitsParams{Tenant: tenant, Status: store.WaitPending})
}

// expireWaits expires the waits whose time has passed, and tells the
// observer of each expiry. Like an approval's, the expiry is a durable
// timer in the store, honoured by any worker after any restart.
func (op *Operator) expireWaits(ctx context.Context) (int, error) {
	ws, ok := op.store.(store.Waiter)
	if !ok {
		return 0, nil
	}
	expired, err := ws.ExpireDueWaits(ctx, store.ExpireWaitsParams{Now: op.now()})
	if err != nil {
		return 0, err
	}
	for _, e := range expired {
		op.observe(store.Run{ID: e.Wait.RunID, Tenant: e.Wait.Tenant}, e.Events)
	}
	if len(expired) > 0 {
		op.done()
	}
	return len(expired), nil
}
