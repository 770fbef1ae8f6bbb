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
		if calls, err = x.gateWaits(ctx, calls); err != nil {
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
			res, err = x.callOrSleep(ctx, use)
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
		x.emit(store.EventLoopDetected, store.LoopDetectedData{Detector: string(x.agent.detector.Mode), Fired: x.guard.Loop.Fired, Action: action})
	}
	x.msgs = append(x.msgs, model.Message{Role: model.RoleUser, Content: results})
	x.run.Step++
	x.emit(store.EventCheckpoint, store.CheckpointData{Messages: len(x.msgs), CostUSD: model.Nanodollars(x.run.CostNanoUSD).Dollars()})
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
	call := store.ToolCallData{ID: use.ID, Tool: use.Name, Args: tool.redact(use.Input)}
	if ok {
		call.Effect = string(tool.Effect)
	}
	x.emit(store.EventToolCall, call)
	if !ok {
		msg := fmt.Sprintf("there is no tool named %q; available tools: %s", use.Name, strings.Join(x.toolNames(), ", "))
		x.emit(store.EventToolResult, store.ToolResultData{ID: use.ID, Tool: use.Name, IsError: true, Preview: preview(msg), UnknownTool: true})
		return model.ToolResultBlock(use.ID, msg, true), nil
	}
	if err := tool.checkArgs(use.Input); err != nil {
		return x.toolError(use, err.Error()+"; fix the arguments and call again"), nil
	}
	if !tool.Effect.SideEffecting() {
		out, err := x.invokeWithRetry(ctx, tool, use)
		if _, later := asksToSleep(err); later {
			return model.Block{}, err
		}
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

// abandonAfter is how long invoke waits, once a call's context has ended,
// for a tool that does not watch its context. Past it the call is given up
// on (it may still be running, and is treated as a timeout: for a side
// effect, an unknown outcome), so a tool blocked without a deadline cannot
// hold the step, and the lease with it, for ever.
const abandonAfter = 100 * time.Millisecond

// invoke calls the tool once, under its timeout from now until notAfter
// and under the lease, turning a panic into an error so one broken tool
// cannot take the worker down. Nothing is sent unless the lease holds for
// at least its margin and there is time left before notAfter: a step
// resumed after a freeze finds either gone.
func (x *execution) invoke(ctx context.Context, tool *Tool, use model.Block, key string, attempt int, notAfter time.Time) (json.RawMessage, error) {
	if err := x.ensureLease(ctx); err != nil {
		return nil, err
	}
	if notAfter.Sub(x.r.cfg.now()) <= 0 {
		return nil, Transient(fmt.Errorf("the call of %s was not sent: its time ran out before it could start", tool.Name))
	}
	callCtx, cancel := x.boundCall(ctx, notAfter)
	defer cancel()
	deadline, _ := callCtx.Deadline()
	ctx = withCallInfo(callCtx, CallInfo{RunID: x.run.ID, Tenant: x.run.Tenant, Step: x.run.Step,
		ToolUseID: use.ID, IdempotencyKey: key, Attempt: attempt, FencingToken: x.run.LeaseEpoch, Deadline: deadline})
	asker := &elicitor{asks: make(chan elicitRequest), waiter: x.r.waiter, now: x.r.cfg.now}
	ctx = context.WithValue(ctx, elicitorKey{}, asker)
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
	for called := false; !called; {
		select {
		case r = <-done:
			called = true
		case q := <-asker.asks:
			// A question the call asks is written here, on the goroutine
			// that owns the run's state; the call then waits for the
			// answer on its own.
			w, err := x.elicit(ctx, asker, use, notAfter, q.q)
			q.reply <- elicitReply{wait: w, err: err}
		case <-ctx.Done():
			called = true
			grace := time.NewTimer(abandonAfter)
			select {
			case r = <-done:
			case <-grace.C:
				x.abandoned = true
				log.Error("tool ignored its context and was abandoned", "tool", tool.Name, "after", tool.Timeout)
				r.err = fmt.Errorf("the call did not return %s after its context ended and was abandoned: %w", abandonAfter, ctx.Err())
			}
			grace.Stop()
		}
	}
	if r.err == nil && !json.Valid(r.out) {
		r.err = fmt.Errorf("tool %s returned a result that is not JSON", tool.Name)
	}
	if r.err != nil && errors.Is(callCtx.Err(), context.DeadlineExceeded) {
		r.err = &TimeoutError{Tool: tool.Name, After: tool.Timeout.String(), Err: r.err}
	}
	return r.out, r.err
}

func (x *execution) toolResult(use model.Block, out json.RawMessage, isError bool) model.Block {
	x.emit(store.EventToolResult, store.ToolResultData{ID: use.ID, Tool: use.Name, IsError: isError, Preview: preview(string(out))})
	return model.ToolResultBlock(use.ID, string(out), isError)
}

func (x *execution) toolError(use model.Block, msg string) model.Block {
	x.emit(store.EventToolResult, store.ToolResultData{ID: use.ID, Tool: use.Name, IsError: true, Preview: preview(msg)})
	return model.ToolResultBlock(use.ID, msg, true)
}

func (x *execution) toolNames() []string {
	names := make([]string, len(x.agent.Tools))
	for i, t := range x.agent.Tools {
		names[i] = t.Name
	}
	if x.agent.Conversation != nil {
		names = append(names, AskUserTool)
	}
	if x.agent.Events != nil {
		names = append(names, WaitForEventTool)
	}
	if x.agent.People != nil {
		names = append(names, AskPersonTool)
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

func compactJSON(raw json.RawMessage) string {
	c, err := ledger.Canonical(raw, nil)
	if err != nil {
		return string(raw)
	}
	return string(c)
}
