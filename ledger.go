package belay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/belayrun/belay/internal/ledger"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// A side effect goes through the ledger: its intent is recorded under a
// business-level key before the first call goes out, every call after it is
// recorded before it goes out, and the outcome is recorded as soon as it is
// known. A call whose outcome is unknown (a timeout, a lost answer, a panic)
// is never taken for a failure: the tool's downstream is asked (Reconcile)
// or called again under the same key (HonorsKey), with backoff, and when
// neither can tell, a person decides.

// errUnknownOutcome pauses a run: a side effect may or may not have
// happened and nothing can tell which, so a person decides.
var errUnknownOutcome = errors.New("outcome unknown")

// ErrUnknownOutcome is what a tool returns (wrapped) when its request went
// out and no answer came back: the effect may have landed.
var ErrUnknownOutcome = errors.New("outcome unknown: the request went out and no answer came back")

// isUnknownOutcome reports whether a failed call of a side effect may have
// landed: it timed out, panicked, or said so itself. A call refused by its
// breaker was never sent; a call whose retries ran out on failures the tool
// called transient failed each time before landing, by its own account.
func isUnknownOutcome(err error) bool {
	if errors.Is(err, ErrBreakerOpen) {
		return false
	}
	var te *TimeoutError
	var pe *PanicError
	return errors.As(err, &te) || errors.As(err, &pe) || errors.Is(err, ErrUnknownOutcome)
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
	key := x.effectKey(tool, keyArgs)
	if x.run.DryRun {
		out, _ := json.Marshal(map[string]any{"ok": true, "dry_run": true,
			"would_have": fmt.Sprintf("called %s with %s", tool.Name, compactJSON(tool.redact(allArgs)))})
		return x.toolResult(use, out, false), nil
	}
	x.emit(store.EventIntent, store.IntentData{Tool: tool.Name, Key: key, Effect: string(tool.Effect)})
	intentEvents := x.takeEvents()
	now := x.r.cfg.now()
	argsHash := ledger.Hash(allArgs)
	if tool.Scope == ScopeTenant {
		// Across runs the key fields are the intent: another run's reason
		// worded otherwise is the same refund of the same charge.
		argsHash = ledger.Hash(keyArgs)
	}
	eff, existed, err := x.r.store.BeginEffect(ctx, store.BeginEffectParams{
		Fence: x.fence(), Now: now,
		// The ledger keeps the arguments as readers may see them; the key and
		// the hash are of the exact ones.
		Effect: store.Effect{Tenant: x.run.Tenant, Key: key, RunID: x.run.ID, Tool: tool.Name,
			ArgsHash: argsHash, Args: tool.redact(allArgs), Step: x.run.Step, InFlightUntil: inFlightUntil(tool, now)},
		LeaseExpires: now.Add(x.r.cfg.LeaseTTL),
		Events:       intentEvents,
	})
	if errors.Is(err, store.ErrEffectConflict) {
		// The write that carried the step's queued events was refused: they
		// go with the next one, all but the intent, which was not recorded.
		x.events = append(intentEvents[:len(intentEvents)-1], x.events...)
		if tool.Scope == ScopeTenant {
			return x.toolError(use, fmt.Sprintf(
				"%s was already called for the same intent (key %s), by this run or an earlier one, with different arguments; nothing was executed. "+
					"Use the earlier result, or if this is a separate action, say so to a person", tool.Name, key)), nil
		}
		return x.toolError(use, fmt.Sprintf(
			"%s was already called in this run for the same intent (key %s) with different arguments; nothing was executed. "+
				"Use the earlier result, or if this is a separate action, say so to a person", tool.Name, key)), nil
	}
	if err != nil {
		return model.Block{}, fmt.Errorf("begin effect %s: %w", key, err)
	}
	x.lease.renewedAt(now)
	x.observe(intentEvents)
	call := sideEffect{tool: tool, use: use, key: key, attempts: eff.Attempts, recorded: !existed,
		notAfter: now.Add(tool.Timeout)}
	switch {
	case existed && eff.RunID != x.run.ID && eff.State == store.EffectDone:
		x.emit(store.EventEffectReused, store.EffectData{Tool: tool.Name, Key: key, EarlierRun: eff.RunID})
		return x.toolResult(use, earlierRunResult(tool.Name, eff), false), nil
	case existed && eff.RunID != x.run.ID:
		// Another run's call under the key has no recorded outcome yet: it
		// may be in flight, or wait for a person. Never a second call.
		return model.Block{}, x.awaitOtherRun(ctx, call, eff)
	case existed && eff.State == store.EffectDone:
		x.emit(store.EventEffectReused, store.EffectData{Tool: tool.Name, Key: key})
		return x.toolResult(use, eff.Result, false), nil
	case existed && eff.Epoch < x.run.LeaseEpoch && eff.Epoch != x.goneEpoch && !eff.InFlightUntil.IsZero() &&
		now.Before(eff.InFlightUntil.Add(x.lease.margin)):
		// A call of the owner the run was taken from as gone is not in
		// flight: its process no longer exists.
		return model.Block{}, x.awaitInFlight(ctx, call, eff)
	case existed:
		// An earlier call went out and its outcome was never recorded.
		call.unknown = fmt.Errorf("a call made at lease epoch %d was never answered", eff.Epoch)
		switch {
		case tool.Reconcile != nil:
			if res, found, err := x.reconcile(ctx, &call); err != nil || found {
				return res, err
			}
		case !tool.HonorsKey:
			return model.Block{}, x.outcomeUnknown(&call, errNoWayToTell)
		}
	}
	return x.apply(ctx, &call)
}

// inFlightUntil is when a call of tool sent at now can no longer be in
// flight: its timeout, and the grace a tool that ignores its context is
// given before it is abandoned.
func inFlightUntil(tool *Tool, now time.Time) time.Time {
	return now.Add(tool.Timeout + abandonAfter)
}

// sideEffect is one side-effecting tool_use on its way to an outcome.
type sideEffect struct {
	tool *Tool
	use  model.Block
	key  string
	// attempts is the ledger's count of calls sent under the key.
	attempts int
	// recorded says the next call is recorded already (by BeginEffect),
	// and notAfter is when the recorded call must have ended: its record
	// says it is in flight no longer.
	recorded bool
	notAfter time.Time
	// unknown, if not nil, says why the outcome under the key is unknown:
	// an earlier call may have landed and nothing has told otherwise.
	unknown error
}

// awaitInFlight pauses the run until a call an earlier holder of the run
// sent under the key can no longer be in flight: asked before then, the
// downstream might not show a call still on its way, and a call made again
// or a person's "it did not happen" would come before it lands.
func (x *execution) awaitInFlight(ctx context.Context, call sideEffect, eff store.Effect) error {
	until := eff.InFlightUntil.Add(x.lease.margin)
	x.run.ResumeAfter = until
	x.emit(store.EventEffectInFlight, store.EffectInFlightData{Tool: call.tool.Name, Key: call.key, Epoch: eff.Epoch, Until: until})
	return x.stop(ctx, store.StatusPaused, "call_in_flight", fmt.Sprintf(
		"a call of %s under key %s sent by the worker that held the run before (lease epoch %d) may still be in flight until %s; "+
			"the run waits until then before it asks the downstream, calls again or asks a person",
		call.tool.Name, call.key, eff.Epoch, until.UTC().Format(time.RFC3339Nano)))
}

// apply calls the side effect until its outcome is known, within the
// tool's retry policy. A call that failed without landing, by the tool's
// account (a TransientError), is made again after a backoff. A call whose
// outcome is unknown is made again under the same key only when that is
// safe: after the downstream was asked and had nothing (Reconcile), or
// because the downstream deduplicates by the key (HonorsKey). When the
// outcome is still unknown at the end, a person decides: the model is never
// told that an effect failed when it may have landed.
func (x *execution) apply(ctx context.Context, call *sideEffect) (model.Block, error) {
	defer func() {
		if ctx.Err() != nil {
			// Cut short by the execution's end, with the call returned.
			x.ended = append(x.ended, call.key)
		}
	}()
	tool := call.tool
	start := x.r.cfg.now()
	for n := 1; ; n++ {
		if x.r.fleet != nil {
			// The breakers are read from the store now, if they must be,
			// not between the attempt's record and its call: that read
			// would take from the call's time.
			_, _ = x.r.fleet.get(ctx, tool.Name, x.r.cfg.now())
		}
		if !call.recorded {
			if err := x.startAttempt(ctx, call); err != nil {
				return model.Block{}, err
			}
		}
		call.recorded = false
		out, err := x.throughBreaker(ctx, tool, func() (json.RawMessage, error) {
			return x.invoke(ctx, tool, call.use, call.key, call.attempts, call.notAfter)
		})
		if err == nil {
			x.applied = true
			return x.settle(ctx, call.use, call.key, store.EffectDone, out)
		}
		if ctx.Err() != nil {
			return model.Block{}, ctx.Err()
		}
		if _, later := asksToSleep(err); later {
			// The tool did not apply its effect and asks to be called
			// after a while: the failure is recorded first (the key stays
			// usable), then the run sleeps, as for a read (callOrSleep).
			if _, err := x.failed(ctx, call, err, describeToolError(err)); err != nil {
				return model.Block{}, err
			}
			return model.Block{}, err
		}
		unknown := isUnknownOutcome(err)
		if !unknown && !isTransient(err) && !errors.Is(err, ErrBreakerOpen) {
			// The tool's own answer: the effect was not applied, and the
			// key stays usable.
			return x.failed(ctx, call, err, describeToolError(err))
		}
		delay := tool.Retry.wait(n, retryAfter(err), x.r.cfg.rand)
		last := n >= tool.Retry.MaxAttempts || x.r.cfg.now().Sub(start)+delay > tool.Retry.MaxElapsed ||
			errors.Is(err, ErrBreakerOpen)
		if unknown {
			call.unknown = err
			x.emit(store.EventEffectUnknown, store.EffectUnknownData{Tool: tool.Name, Key: call.key, Error: err.Error(), Attempt: n})
			if err := x.write(ctx, []store.EffectUpdate{{Tenant: x.run.Tenant, Key: call.key, State: store.EffectUnknown}}); err != nil {
				return model.Block{}, err
			}
			switch {
			case tool.Reconcile != nil:
				// A call given up on may still be landing: the downstream is
				// given the backoff's time before it is asked.
				if err := x.r.cfg.sleep(ctx, delay); err != nil {
					return model.Block{}, err
				}
				if res, found, err := x.reconcile(ctx, call); err != nil || found {
					return res, err
				}
				if last {
					return x.failed(ctx, call, err, fmt.Sprintf(
						"%s: %d calls did not go through (the last: %v); %s has no record of any, so nothing was applied. "+
							"Do not call it again now: tell the customer, or escalate", tool.Name, n, err, tool.Name))
				}
				x.emit(store.EventToolRetry, store.ToolRetryData{Tool: tool.Name, Attempt: n, Error: err.Error()})
				continue
			case !tool.HonorsKey:
				return model.Block{}, x.outcomeUnknown(call, errNoWayToTell)
			}
		}
		if last {
			if call.unknown != nil {
				return model.Block{}, x.outcomeUnknown(call, errors.New("its downstream honours the key, but no call under it was answered"))
			}
			if errors.Is(err, ErrBreakerOpen) {
				return x.failed(ctx, call, err, err.Error())
			}
			return x.failed(ctx, call, err, replan(&RetriesExhaustedError{Tool: tool.Name, Attempts: n, Err: err}))
		}
		x.emit(store.EventToolRetry, store.ToolRetryData{Tool: tool.Name, Attempt: n, Error: err.Error(), BackoffS: delay.Seconds()})
		if err := x.r.cfg.sleep(ctx, delay); err != nil {
			return model.Block{}, err
		}
	}
}

// startAttempt records the next call under the key before it goes out,
// renewing the lease with it, so the call starts with the whole lease and a
// worker that takes the run over knows until when it may be in flight.
func (x *execution) startAttempt(ctx context.Context, call *sideEffect) error {
	now := x.r.cfg.now()
	events := x.takeEvents()
	eff, err := x.r.store.StartAttempt(ctx, store.StartAttemptParams{
		Fence: x.fence(), Now: now, Tenant: x.run.Tenant, Key: call.key,
		InFlightUntil: inFlightUntil(call.tool, now), LeaseExpires: now.Add(x.r.cfg.LeaseTTL), Events: events,
	})
	if err != nil {
		return fmt.Errorf("record a call of %s under key %s: %w", call.tool.Name, call.key, err)
	}
	x.lease.renewedAt(now)
	x.observe(events)
	call.attempts, call.notAfter = eff.Attempts, now.Add(call.tool.Timeout)
	return nil
}

// reconcile asks the downstream whether an effect under the key happened,
// retrying the question itself with backoff when it fails. It settles what
// it finds. An answer it cannot get leaves the outcome to a person.
func (x *execution) reconcile(ctx context.Context, call *sideEffect) (model.Block, bool, error) {
	tool := call.tool
	for n := 1; ; n++ {
		out, found, err := x.askDownstream(ctx, call)
		x.emit(store.EventReconcile, store.ReconcileData{Tool: tool.Name, Key: call.key, Found: found, Error: errString(err)})
		if ctx.Err() != nil {
			return model.Block{}, false, ctx.Err()
		}
		switch {
		case err == nil && found:
			blk, err := x.settle(ctx, call.use, call.key, store.EffectDone, out)
			return blk, true, err
		case err == nil:
			call.unknown = nil
			return model.Block{}, false, nil
		case n >= tool.Retry.MaxAttempts:
			return model.Block{}, false, x.outcomeUnknown(call, fmt.Errorf("asking the downstream what happened failed %d times, the last with: %v", n, err))
		}
		if err := x.r.cfg.sleep(ctx, tool.Retry.backoff(n, x.r.cfg.rand)); err != nil {
			return model.Block{}, false, err
		}
	}
}

// askDownstream runs the tool's reconcile hook once, under the lease and the
// tool's timeout. A panic in it is the agent's code failing, as anywhere in
// a step: the run pauses for a fix.
func (x *execution) askDownstream(ctx context.Context, call *sideEffect) (json.RawMessage, bool, error) {
	if err := x.ensureLease(ctx); err != nil {
		return nil, false, err
	}
	ctx, cancel := x.boundCall(ctx, x.r.cfg.now().Add(call.tool.Timeout))
	defer cancel()
	return call.tool.Reconcile(ctx, call.key, call.use.Input)
}

// errNoWayToTell is why the outcome of a tool with neither Reconcile nor
// HonorsKey is left to a person.
var errNoWayToTell = errors.New("the tool cannot be asked (no Reconcile) and its downstream does not honour keys, so it is not retried blindly")

// outcomeUnknown is the error that pauses the run for a person, saying what
// was tried and why nothing more can be.
func (x *execution) outcomeUnknown(call *sideEffect, why error) error {
	return fmt.Errorf("%w: %s under key %s may have been applied: calls sent under the key: %d, the last ended with: %v; %v. "+
		"Check the downstream system, then resolve the intent (belay resolve %s %s --applied, or --not-applied to call it again)",
		errUnknownOutcome, call.tool.Name, call.key, call.attempts, call.unknown, why, x.run.ID, call.key)
}

// failed records that the effect was not applied, so the key may be begun
// again, and tells the model msg.
func (x *execution) failed(ctx context.Context, call *sideEffect, cause error, msg string) (model.Block, error) {
	out, _ := json.Marshal(map[string]any{"ok": false, "error": cause.Error()})
	if _, err := x.settle(ctx, call.use, call.key, store.EffectFailed, out); err != nil {
		return model.Block{}, err
	}
	return x.toolError(call.use, msg), nil
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
