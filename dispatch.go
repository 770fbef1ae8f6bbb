package belay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/belayrun/belay/internal/guard"
	"github.com/belayrun/belay/internal/ledger"
	"github.com/belayrun/belay/internal/text"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// errUnknownOutcome pauses a run: a side effect may or may not have
// happened and nothing can tell which, so a person decides.
var errUnknownOutcome = errors.New("outcome unknown")

// dispatch executes the tool calls of one assistant turn and appends all
// their results in one message, as the model's protocol requires; the run's
// next write, with the next model response, makes the step durable.
func (x *execution) dispatch(ctx context.Context, turn model.Message) error {
	uses := model.ToolUses(turn.Content)
	var calls []gatedCall
	if x.guard.CutOff == len(x.msgs) {
		// The turn ran out of output tokens: its calls' arguments may be
		// cut short, and a call run with what is left could act on far
		// more than asked (a filter emptied to {}).
		x.guard.CutOff = 0
		for _, use := range uses {
			blk := x.refuse(use, "This call was cut off by the output token limit before its arguments were complete. Nothing was executed. Call it again, with shorter arguments or fewer calls in one turn.")
			calls = append(calls, gatedCall{use: use, result: &blk})
		}
	} else {
		var err error
		if calls, err = x.gate(ctx, uses); err != nil {
			return err
		}
	}
	results := make([]model.Block, 0, len(uses))
	stuck := false
	for _, call := range calls {
		use := call.use
		x.applied = false
		var res model.Block
		var err error
		if call.result != nil {
			res = *call.result
		} else {
			res, err = x.callTool(ctx, use)
		}
		if errors.Is(err, errUnknownOutcome) {
			// The packet tells what the turn did so far, and which call's
			// outcome is unknown.
			x.turnResults, x.unknownCall = results, use.ID
			return x.escalate(ctx, store.StatusPaused, "unknown_outcome", err.Error(), nil, nil)
		}
		if err != nil {
			return err
		}
		x.guard.Calls++
		if x.agent.detect {
			fact := x.guard.newFact(x.agent.tools[use.Name], use, res, x.applied)
			if x.agent.detector.Observe(&x.guard.Loop, guard.Call{Tool: use.Name, Args: use.Input, NewFact: fact}) {
				stuck = true
			}
		}
		results = append(results, res)
	}
	escalate := false
	if stuck {
		x.guard.Loop.Fired++
		x.guard.Loop.Reset()
		action := "replan"
		if x.guard.Loop.Fired > 1 {
			action, escalate = "escalate", true
		} else {
			results = append(results, model.TextBlock(replanMessage(x.agent.detector)))
		}
		x.emit("loop_detected", map[string]any{"detector": x.agent.detector.Mode, "fired": x.guard.Loop.Fired, "action": action})
	}
	x.msgs = append(x.msgs, model.Message{Role: model.RoleUser, Content: results})
	x.run.Step++
	x.emit("checkpoint", checkpointEvent{Messages: len(x.msgs), CostUSD: model.Nanodollars(x.run.CostNanoUSD).Dollars()})
	x.stepUnsaved = true
	if escalate {
		return x.escalate(ctx, store.StatusEscalated, "stuck_loop", fmt.Sprintf(
			"the %s loop detector fired again after the model was asked to replan", x.agent.detector.Mode), nil, nil)
	}
	// The results are made durable by the run's next write, which is almost
	// always the next model response: one commit a step instead of two. What
	// that can lose in a crash is safe to do again: every side effect of the
	// turn is already settled in the ledger, which answers its replay, and
	// the tools that only read read the world afresh.
	return nil
}

// callTool answers one tool_use block. Everything the model got wrong comes
// back as an is_error result that teaches; only an unknown outcome or a lost
// lease stops the step.
func (x *execution) callTool(ctx context.Context, use model.Block) (model.Block, error) {
	tool, ok := x.agent.tools[use.Name]
	call := toolCallEvent{ID: use.ID, Tool: use.Name, Args: tool.redact(use.Input)}
	if ok {
		call.Effect = tool.Effect
	}
	x.emit("tool_call", call)
	if !ok {
		msg := fmt.Sprintf("there is no tool named %q; available tools: %s", use.Name, strings.Join(x.toolNames(), ", "))
		x.emit("tool_result", toolResultEvent{ID: use.ID, Tool: use.Name, IsError: true, Preview: preview(msg), UnknownTool: true})
		return model.ToolResultBlock(use.ID, msg, true), nil
	}
	if err := tool.checkArgs(use.Input); err != nil {
		return x.toolError(use, err.Error()+"; fix the arguments and call again"), nil
	}
	if !tool.Effect.SideEffecting() {
		out, err := x.invokeWithRetry(ctx, tool, use, "", 1)
		if err != nil {
			if ctx.Err() != nil {
				return model.Block{}, ctx.Err()
			}
			return x.toolError(use, describeToolError(err)), nil
		}
		return x.toolResult(use, out, false), nil
	}
	return x.callSideEffect(ctx, tool, use)
}

// callSideEffect records the intent under a business-level key before the
// call goes out and the result after it, so a replayed step finds the key
// and never applies the effect twice.
func (x *execution) callSideEffect(ctx context.Context, tool *Tool, use model.Block) (model.Block, error) {
	keyArgs, err := ledger.Canonical(use.Input, tool.KeyFields)
	if err != nil {
		return x.toolError(use, err.Error()), nil
	}
	allArgs, err := ledger.Canonical(use.Input, nil)
	if err != nil {
		return x.toolError(use, err.Error()), nil
	}
	key := ledger.Key(x.run.ID, tool.Name, keyArgs)
	if x.run.DryRun {
		out, _ := json.Marshal(map[string]any{"ok": true, "dry_run": true,
			"would_have": fmt.Sprintf("called %s with %s", tool.Name, compactJSON(tool.redact(allArgs)))})
		return x.toolResult(use, out, false), nil
	}
	x.emit("intent", map[string]any{"tool": tool.Name, "key": key, "effect": tool.Effect})
	intentEvents := x.takeEvents()
	eff, existed, err := x.r.store.BeginEffect(ctx, store.BeginEffectParams{
		Fence: x.fence(), Now: x.r.cfg.now(),
		Effect: store.Effect{Tenant: x.run.Tenant, Key: key, RunID: x.run.ID, Tool: tool.Name,
			ArgsHash: ledger.Hash(allArgs), Args: allArgs, Step: x.run.Step},
		Events: intentEvents,
	})
	if obs := x.r.cfg.Observer; obs != nil && err == nil {
		for _, ev := range intentEvents {
			obs.Event(x.observed(), ev)
		}
	}
	if errors.Is(err, store.ErrEffectConflict) {
		// The write that carried the step's queued events was refused: they
		// go with the next one, all but the intent, which was not recorded.
		x.events = append(intentEvents[:len(intentEvents)-1], x.events...)
		return x.toolError(use, fmt.Sprintf(
			"%s was already called in this run for the same intent (key %s) with different arguments; nothing was executed. "+
				"Use the earlier result, or if this is a separate action, say so to a person", tool.Name, key)), nil
	}
	if err != nil {
		return model.Block{}, fmt.Errorf("begin effect %s: %w", key, err)
	}
	if existed && eff.State == store.EffectDone {
		x.emit("effect_reused", map[string]any{"tool": tool.Name, "key": key})
		return x.toolResult(use, eff.Result, false), nil
	}
	if existed {
		// An earlier attempt went out and its outcome was never recorded.
		res, found, err := x.resolveUnknown(ctx, tool, use, key)
		if err != nil {
			return model.Block{}, err
		}
		if found {
			return res, nil
		}
	}
	out, callErr := x.invokeWithRetry(ctx, tool, use, key, eff.Attempts)
	if callErr != nil && ctx.Err() != nil {
		return model.Block{}, ctx.Err()
	}
	if callErr != nil && isUnknownOutcome(callErr) {
		x.emit("effect_unknown", map[string]any{"tool": tool.Name, "key": key, "error": callErr.Error()})
		if err := x.write(ctx, []store.EffectUpdate{{Tenant: x.run.Tenant, Key: key, State: store.EffectUnknown}}); err != nil {
			return model.Block{}, err
		}
		res, found, err := x.resolveUnknown(ctx, tool, use, key)
		if err != nil || found {
			return res, err
		}
		// Asked and not found (or the downstream honours the key): the
		// call did not land, so calling again under the same key is safe.
		out, callErr = x.invokeWithRetry(ctx, tool, use, key, eff.Attempts+1)
		if callErr != nil && isUnknownOutcome(callErr) {
			return model.Block{}, fmt.Errorf("%w: %s %s: %v", errUnknownOutcome, tool.Name, key, callErr)
		}
	}
	if callErr == nil {
		x.applied = true
		return x.settle(ctx, use, key, store.EffectDone, out)
	}
	// The tool says the effect was not applied: the key stays usable.
	failed, _ := json.Marshal(map[string]any{"ok": false, "error": callErr.Error()})
	if _, err := x.settle(ctx, use, key, store.EffectFailed, failed); err != nil {
		return model.Block{}, err
	}
	return x.toolError(use, describeToolError(callErr)), nil
}

// resolveUnknown finds out whether an earlier attempt under key landed. With
// a reconcile hook it asks the downstream system; a tool whose downstream
// honours the key is simply called again. Otherwise the outcome stays
// unknown and the run pauses for a person: a blind retry could do it twice.
func (x *execution) resolveUnknown(ctx context.Context, tool *Tool, use model.Block, key string) (model.Block, bool, error) {
	switch {
	case tool.Reconcile != nil:
		out, found, err := tool.Reconcile(ctx, key, use.Input)
		x.emit("reconcile", map[string]any{"tool": tool.Name, "key": key, "found": found, "error": errString(err)})
		if err != nil {
			return model.Block{}, false, fmt.Errorf("%w: %s %s: reconcile: %v", errUnknownOutcome, tool.Name, key, err)
		}
		if !found {
			return model.Block{}, false, nil
		}
		blk, err := x.settle(ctx, use, key, store.EffectDone, out)
		return blk, true, err
	case tool.HonorsKey:
		return model.Block{}, false, nil
	default:
		return model.Block{}, false, fmt.Errorf(
			"%w: %s under key %s may have been applied; the tool cannot be asked (no Reconcile) and its downstream does not honour keys, so it is not retried blindly. Check the downstream system, then resolve the intent",
			errUnknownOutcome, tool.Name, key)
	}
}

// settle records the outcome of a side effect at once, so a crash after it
// does not leave the intent pending.
func (x *execution) settle(ctx context.Context, use model.Block, key string, state store.EffectState, out json.RawMessage) (model.Block, error) {
	blk := x.toolResult(use, out, false)
	if err := x.write(ctx, []store.EffectUpdate{{Tenant: x.run.Tenant, Key: key, State: state, Result: out}}); err != nil {
		return model.Block{}, err
	}
	return blk, nil
}

// abandonAfter is how long invoke waits, once a call's context has ended,
// for a tool that does not watch its context. Past it the call is given up
// on (it may still be running, and is treated as a timeout: for a side
// effect, an unknown outcome), so a tool blocked without a deadline cannot
// hold the step, and the lease with it, for ever.
const abandonAfter = 100 * time.Millisecond

// invoke calls the tool once, under its timeout, turning a panic into an
// error so one broken tool cannot take the worker down.
func (x *execution) invoke(ctx context.Context, tool *Tool, use model.Block, key string, attempt int) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, tool.Timeout)
	defer cancel()
	ctx = withCallInfo(ctx, CallInfo{RunID: x.run.ID, Tenant: x.run.Tenant, Step: x.run.Step,
		ToolUseID: use.ID, IdempotencyKey: key, Attempt: attempt})
	start := x.r.cfg.now()
	defer func() { x.toolTime += x.r.cfg.now().Sub(start) }()

	type result struct {
		out json.RawMessage
		err error
	}
	// The call runs on its own goroutine, which may outlive invoke: it
	// touches nothing of the execution but this logger.
	log := x.log()
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				log.Error("tool panicked", "tool", tool.Name, "panic", p, "stack", string(debug.Stack()))
				r = result{err: &PanicError{Tool: tool.Name, Value: p}}
			}
			done <- r
		}()
		r.out, r.err = tool.Call(ctx, use.Input)
	}()
	var r result
	select {
	case r = <-done:
	case <-ctx.Done():
		grace := time.NewTimer(abandonAfter)
		select {
		case r = <-done:
		case <-grace.C:
			log.Error("tool ignored its context and was abandoned", "tool", tool.Name, "after", tool.Timeout)
			r.err = fmt.Errorf("the call did not return %s after its context ended and was abandoned: %w", abandonAfter, ctx.Err())
		}
		grace.Stop()
	}
	if r.err == nil && !json.Valid(r.out) {
		r.err = fmt.Errorf("tool %s returned a result that is not JSON", tool.Name)
	}
	if r.err != nil && ctx.Err() == context.DeadlineExceeded {
		r.err = &TimeoutError{Tool: tool.Name, After: tool.Timeout.String(), Err: r.err}
	}
	return r.out, r.err
}

func (x *execution) toolResult(use model.Block, out json.RawMessage, isError bool) model.Block {
	x.emit("tool_result", toolResultEvent{ID: use.ID, Tool: use.Name, IsError: isError, Preview: preview(string(out))})
	return model.ToolResultBlock(use.ID, string(out), isError)
}

func (x *execution) toolError(use model.Block, msg string) model.Block {
	x.emit("tool_result", toolResultEvent{ID: use.ID, Tool: use.Name, IsError: true, Preview: preview(msg)})
	return model.ToolResultBlock(use.ID, msg, true)
}

func (x *execution) toolNames() []string {
	names := make([]string, len(x.agent.Tools))
	for i, t := range x.agent.Tools {
		names[i] = t.Name
	}
	return names
}

// takeEvents hands the queued events to a write that is not a checkpoint.
func (x *execution) takeEvents() []store.Event {
	ev := x.events
	x.events = nil
	return ev
}

// PanicError is a tool call that panicked.
type PanicError struct {
	Tool  string
	Value any
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("tool %s panicked: %v; the call did not complete", e.Tool, e.Value)
}

// TimeoutError is a tool call that ran past its timeout. For a side effect
// it is an unknown outcome: the call may have landed.
type TimeoutError struct {
	Tool  string
	After string
	Err   error
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("tool %s timed out after %s: %v", e.Tool, e.After, e.Err)
}

func (e *TimeoutError) Unwrap() error { return e.Err }

// ErrUnknownOutcome is what a tool returns (wrapped) when its request went
// out and no answer came back: the effect may have landed.
var ErrUnknownOutcome = errors.New("outcome unknown: the request went out and no answer came back")

// isUnknownOutcome reports whether a failed side effect may have landed. A
// call whose retries ran out failed each time before landing, by its own
// account, or was idempotent.
func isUnknownOutcome(err error) bool {
	var re *RetriesExhaustedError
	if errors.As(err, &re) || errors.Is(err, ErrBreakerOpen) {
		return false
	}
	var te *TimeoutError
	var pe *PanicError
	return errors.As(err, &te) || errors.As(err, &pe) || errors.Is(err, ErrUnknownOutcome)
}

// describeToolError is what the model reads about a failed call.
func describeToolError(err error) string {
	var re *RetriesExhaustedError
	if errors.As(err, &re) {
		return replan(re)
	}
	return err.Error()
}

func preview(s string) string { return text.Clip(s, 200) }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
