package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// Answers to runs that wait for something from outside them, beside belay
// say's reply to their user: belay signal sends a named event, belay
// answer answers a question to a person or posts a deferred call's result.

const signalUsage = `usage: belay signal RUN NAME [--payload JSON] [--key K] [--db PATH]

Sends the event NAME to a run: a run that waits for it (wait_for_event) goes on
with the payload as the wait's result; a run that does not wait for it yet keeps
it for its next wait of that name. With --key the event is idempotent: sent again
with the same key, name and payload it changes nothing.`

func runSignal(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("signal", signalUsage, stdout)
	db := dbFlag(fs)
	payload := fs.String("payload", "{}", `the event's data, a JSON value the run reads ('{"charge": "CH-2"}')`)
	key := fs.String("key", "", "idempotency key: the same key, name and payload sent again change nothing")
	asJSON := jsonFlag(fs, "the event as the run took it, one object")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usageError{fmt.Sprintf("signal: want a run and the event's name, got %d arguments (%s)", len(pos), fs.usageLine())}
	}
	if !json.Valid([]byte(*payload)) {
		return usageError{fmt.Sprintf(`signal: --payload %q is not JSON; quote text as a JSON string ('"settled"') or give an object ('{"charge": "CH-2"}')`, *payload)}
	}
	runID, name := pos[0], pos[1]
	st, err := db.openExisting(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := getRun(ctx, st, db, runID); err != nil {
		return err
	}
	sent, err := belay.NewOperator(st).Signal(ctx, belay.AnyTenant, runID, belay.Event{Name: name, Payload: json.RawMessage(*payload), Key: *key})
	switch {
	case errors.Is(err, belay.ErrInvalidEvent):
		return usageError{err.Error()}
	case errors.Is(err, store.ErrNotWaiting):
		return fmt.Errorf("%w (see the run with: belay show %s %s)", err, runID, db)
	case err != nil:
		return err
	}
	sig := sent.Signal
	if *asJSON {
		return writeJSON(stdout, map[string]any{"id": sig.ID, "run_id": sig.RunID, "name": sig.Name, "wait_id": sig.ConsumedBy,
			"created_at": sig.CreatedAt.UTC(), "repeated": sent.Repeated})
	}
	switch {
	case sent.Repeated:
		fmt.Fprintf(stdout, "run %s had this event already (key %s); nothing changed\n", runID, *key)
	case sig.ConsumedBy != "":
		fmt.Fprintf(stdout, "sent %s to run %s, which waited for it\nthe next worker on %s continues it\n", name, runID, db.Name())
	default:
		fmt.Fprintf(stdout, "sent %s to run %s, which keeps it for its next wait of that name\n", name, runID)
	}
	return nil
}

const answerUsage = `usage: belay answer RUN CALL ANSWER [--is-error] [--key K] [--as WHO] [--db PATH]

Answers the call CALL (its tool_use id, in brackets in belay show RUN) of a run
that waits for it. For a question to a person (ask_person) ANSWER is the
answer in words, one of the question's choices if it has some; for a deferred
tool's call it is the call's result as JSON, and --is-error marks a failure.
The run goes on with the answer as the call's result. With --key the answer is
idempotent: sent again with the same key and answer it changes nothing.`

func runAnswer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("answer", answerUsage, stdout)
	db := dbFlag(fs)
	isError := fs.Bool("is-error", false, "a deferred call's result is a failure the model reads as such")
	key := fs.String("key", "", "idempotency key: the same key and answer sent again change nothing")
	as := fs.String("as", "", "who answers, recorded on the wait (default: human:$USER)")
	asJSON := jsonFlag(fs, "the wait the answer answered, one object")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 3 {
		return usageError{fmt.Sprintf("answer: want a run, the call and the answer, got %d arguments (%s; a run's calls are in: belay show RUN)", len(pos), fs.usageLine())}
	}
	runID, call, answer := pos[0], pos[1], pos[2]
	st, err := db.openExisting(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := getRun(ctx, st, db, runID); err != nil {
		return err
	}
	ws, ok := st.(store.Waiter)
	if !ok {
		return belay.ErrWaitsUnsupported
	}
	waits, err := ws.Waits(ctx, store.ListWaitsParams{RunID: runID})
	if err != nil {
		return err
	}
	i := slices.IndexFunc(waits, func(w store.Wait) bool { return w.ToolUseID == call })
	if i < 0 {
		return fmt.Errorf("run %s has no call %s that waits (its calls are in: belay show %s %s)", runID, call, runID, db)
	}
	var value json.RawMessage
	switch w := waits[i]; w.Kind {
	case store.WaitPerson:
		if *isError {
			return usageError{"answer: --is-error is for a deferred tool's result; call " + call + " is a question to a person"}
		}
		value, _ = json.Marshal(answer)
	case store.WaitResult:
		if !json.Valid([]byte(answer)) {
			return usageError{fmt.Sprintf(`answer: call %s of %s waits for its result as JSON; %q is not JSON (quote text as a JSON string: '"done"')`, call, w.Name, answer)}
		}
		value = json.RawMessage(answer)
	default:
		hint := "belay say " + runID + " TEXT"
		if w.Kind == store.WaitEvent {
			hint = "belay signal " + runID + " " + w.Name
		}
		return usageError{fmt.Sprintf("answer: call %s waits for %s, which %s sends", call, waitKindWords(w.Kind), hint)}
	}
	said, err := belay.NewOperator(st).PostResult(ctx, belay.AnyTenant, runID, call, belay.Result{Value: value, IsError: *isError,
		By: decider(*as), Key: *key})
	switch {
	case errors.Is(err, store.ErrNotWaiting), errors.Is(err, store.ErrWaitExpired):
		return fmt.Errorf("%w (see the run with: belay show %s %s)", err, runID, db)
	case err != nil:
		return err
	}
	if *asJSON {
		return writeJSON(stdout, map[string]any{"run_id": said.Wait.RunID, "call_id": said.Wait.ToolUseID, "wait_id": said.Wait.ID,
			"kind": said.Wait.Kind, "answered_by": said.Wait.AnsweredBy, "answered_at": said.Wait.AnsweredAt.UTC(), "repeated": said.Repeated})
	}
	if said.Repeated {
		fmt.Fprintf(stdout, "call %s of run %s had this answer already (key %s); nothing changed\n", call, runID, *key)
		return nil
	}
	fmt.Fprintf(stdout, "answered call %s of run %s\nthe next worker on %s continues it\n", call, runID, db.Name())
	return nil
}

func waitKindWords(k store.WaitKind) string {
	switch k {
	case store.WaitInput:
		return "its user's reply"
	case store.WaitEvent:
		return "an event"
	}
	return string(k)
}
