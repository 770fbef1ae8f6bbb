package belay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// Timers: a tool that says "come back later" (ResumeAfter). The run is
// paused until then on the store's timer (resume_after, which any worker's
// claim honours after any restart) and holds nothing meanwhile; the guard
// state records when the call asked to come back. When the run is claimed
// at that time the turn runs again, and the call, instead of being made
// again, answers the model that the time has passed.

// ResumeAfter is what a tool returns, as its error, to have the run come
// back after d: "check in 48 hours that the refund landed". The run sleeps
// durably; after d the call's result tells the model that the time has
// passed, and the tool is not called again for it.
//
// A tool with a side effect may return it too, as any error, only when it
// did not apply its effect ("the bank is closed; try after 9:00"): the
// ledger records the call as failed, with nothing applied, before the run
// sleeps, and after d the model may call the tool again under the same
// key. A tool that applied its effect returns its result instead, and the
// model waits with a read tool that returns ResumeAfter, or with
// wait_for_event (Agent.Events).
func ResumeAfter(d time.Duration) error { return &resumeAfterError{after: d} }

type resumeAfterError struct{ after time.Duration }

func (e *resumeAfterError) Error() string {
	return fmt.Sprintf("the tool asked to come back after %s", e.after)
}

// asksToSleep reports whether err is a tool's ResumeAfter, and for how
// long.
func asksToSleep(err error) (time.Duration, bool) {
	var later *resumeAfterError
	if errors.As(err, &later) && later.after > 0 {
		return later.after, true
	}
	return 0, false
}

// callOrSleep answers a call the gate let through: the call itself, or,
// for a call that asked to come back later, the time passed (or another
// sleep, if the run was woken early).
func (x *execution) callOrSleep(ctx context.Context, use model.Block) (model.Block, error) {
	if due, ok := x.guard.Sleeps[use.ID]; ok {
		if now := x.r.cfg.now(); now.Before(due) {
			return model.Block{}, x.sleepUntil(ctx, use, due)
		}
		delete(x.guard.Sleeps, use.ID)
		x.emit(store.EventToolCall, store.ToolCallData{ID: use.ID, Tool: use.Name, Args: x.agent.tools[use.Name].redact(use.Input)})
		msg := fmt.Sprintf("The time this call asked to come back at (%s) has passed; it is now %s. Do now what you were waiting to do.",
			due.UTC().Format(time.RFC3339), x.r.cfg.now().UTC().Format(time.RFC3339))
		x.emit(store.EventToolResult, store.ToolResultData{ID: use.ID, Tool: use.Name, Preview: preview(msg)})
		return model.ToolResultBlock(use.ID, msg, false), nil
	}
	res, err := x.callTool(ctx, use)
	if d, ok := asksToSleep(err); ok {
		return model.Block{}, x.sleepUntil(ctx, use, x.r.cfg.now().Add(d))
	}
	return res, err
}

// sleepUntil pauses the run until due, recording that the call waits for
// it, and lets go. The turn's other results are not kept: it runs again
// at due, its reads afresh and its side effects answered by the ledger.
func (x *execution) sleepUntil(ctx context.Context, use model.Block, due time.Time) error {
	if x.guard.Sleeps == nil {
		x.guard.Sleeps = map[string]time.Time{}
	}
	x.guard.Sleeps[use.ID] = due
	x.run.ResumeAfter = due
	return x.stop(ctx, store.StatusPaused, "sleeping",
		fmt.Sprintf("%s asked to come back at %s", use.Name, due.UTC().Format(time.RFC3339)))
}
