package belay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/belayrun/belay/internal/text"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// The write side of a step: every change a step makes to its run reaches
// the store through write (a checkpoint fenced by the lease epoch), or, for
// a step cut short, through writeBack of the last durable state. Trace
// events are queued with emit and committed with the state they describe,
// then handed to the observer.

// stateOf is the state a claimed run has in the store, as a write that
// leaves it unchanged would write it; the lease is released.
func stateOf(run store.Run) store.RunUpdate {
	return store.RunUpdate{Status: run.Status, Step: run.Step, Messages: run.Messages,
		InputTokens: run.InputTokens, OutputTokens: run.OutputTokens, ModelCalls: run.ModelCalls,
		CostNanoUSD: run.CostNanoUSD, Plan: run.Plan, Guard: run.Guard, ResumeAfter: run.ResumeAfter,
		StopReason: run.StopReason, StopDetail: run.StopDetail, Final: run.Final, Escalation: run.Escalation}
}

// pauseForFix pauses the run, as its last write left it, for a person to
// fix the agent's code and resume it (belay resume).
func (x *execution) pauseForFix(ctx context.Context, hook *hookError) {
	u := x.durable
	u.Status, u.ResumeAfter, u.LeaseExpires, u.KeepLease = store.StatusPaused, time.Time{}, time.Time{}, false
	u.StopReason = "step_failed"
	u.StopDetail = text.Clip(fmt.Sprintf("step %d failed in the agent's own code: %v; fix it, deploy, then resume the run (belay resume %s)",
		x.run.Step, hook.err, x.run.ID), 2000)
	x.events, x.outbox = nil, nil
	// The packet tells whoever is notified of escalations; without it
	// (the store could not be read) the run still pauses.
	if packet, err := x.packet(ctx, u.Status, u.StopReason, u.StopDetail, nil); err == nil {
		if raw, err := json.Marshal(packet); err == nil {
			u.Escalation = raw
			x.outbox = append(x.outbox, store.OutboxMessage{Kind: "escalation", Payload: raw})
		}
	}
	x.emit(store.EventStop, store.StopData{Status: u.Status, Reason: u.StopReason, Detail: u.StopDetail})
	if err := x.writeBack(ctx, u); err != nil {
		x.log().Error("pause the failed run; it is claimed again once its lease expires", "err", err)
	}
}

// writeBack writes u, a state built from the last durable one, with the
// events and notifications queued since it was taken (and nothing else the
// step held in memory), and tells the observer (traces, metrics) of them.
func (x *execution) writeBack(ctx context.Context, u store.RunUpdate) error {
	p := store.CheckpointParams{Fence: x.fence(), Now: x.r.cfg.now(), Run: u, Events: x.events, Outbox: x.outbox}
	if err := x.r.store.Checkpoint(ctx, p); err != nil {
		return err
	}
	x.observe(p.Events)
	return nil
}

// stop records the run's new status with a stop event and lets go of it.
func (x *execution) stop(ctx context.Context, status store.Status, reason, detail string) error {
	return x.stopWith(ctx, status, reason, detail, nil)
}

// stopWith is stop for a run its budget stopped: the stop event says what
// was used, what the next call would have taken, and the limit.
func (x *execution) stopWith(ctx context.Context, status store.Status, reason, detail string, over *budgetStop) error {
	x.run.Status = status
	x.run.StopReason = reason
	x.run.StopDetail = detail
	data := store.StopData{Status: status, Reason: reason, Detail: detail}
	if over != nil {
		data.Used, data.NextCall, data.Limit, data.Unit = &over.Used, &over.Next, &over.Limit, over.Unit
	}
	if !x.run.ResumeAfter.IsZero() && status == store.StatusPaused {
		data.ResumeAfter = &x.run.ResumeAfter
	}
	x.emit(store.EventStop, data)
	if status.Terminal() {
		payload, _ := json.Marshal(map[string]any{"run_id": x.run.ID, "tenant": x.run.Tenant, "agent": x.run.Agent,
			"user": x.run.User, "status": status, "reason": reason, "steps": x.run.Step,
			"cost_usd": model.Nanodollars(x.run.CostNanoUSD).Dollars(), "final": preview(x.run.Final)})
		x.outbox = append(x.outbox, store.OutboxMessage{Kind: "run_finished", Payload: payload})
	}
	if err := x.write(ctx, nil, withRelease()); err != nil {
		return err
	}
	return errStop
}

// release hands the run to another worker as its last write left it. A
// step cut short (a shutdown whose deadline passed) may have changed the
// run in memory for a write that failed: a status with the approvals it was
// to ask for, say. Written without them, the run would wait for a decision
// nobody can take; left out, the step runs again on the next worker, as
// after a crash, and the ledger keeps its effects from happening twice.
func (x *execution) release(ctx context.Context) {
	if x.writeInDoubt {
		// Written back, the state before a write that did commit would undo
		// it; the lease runs out instead and the next worker reads the store.
		x.log().Warn("a write was cut short and may have committed; the run is taken over once its lease expires")
		return
	}
	if len(x.ended) > 0 && !x.abandoned {
		// The calls cut short have returned: the next worker need not wait
		// for them before it asks what happened.
		if err := x.r.store.EndCalls(ctx, store.EndCallsParams{Fence: x.fence(), Now: x.r.cfg.now(),
			Tenant: x.run.Tenant, Keys: x.ended}); err != nil {
			x.log().Warn("record that the calls cut short have returned; the next worker waits them out", "err", err)
		}
	}
	u := x.durable
	u.LeaseExpires, u.KeepLease = time.Time{}, false
	x.events, x.outbox = nil, nil
	x.emit(store.EventReleased, store.ReleasedData{Epoch: x.run.LeaseEpoch})
	if err := x.writeBack(ctx, u); err != nil && !errors.Is(err, store.ErrLeaseLost) {
		x.log().Warn("release the run; another worker takes it once its lease expires", "err", err)
	}
}

type writeOption func(*store.CheckpointParams)

func withRelease() writeOption {
	return func(p *store.CheckpointParams) { p.Run.LeaseExpires, p.Run.KeepLease = time.Time{}, false }
}

// write makes the execution's state durable in one fenced transaction: the
// run row, the messages not yet saved, the pending events and the effects.
func (x *execution) write(ctx context.Context, effects []store.EffectUpdate, opts ...writeOption) error {
	now := x.r.cfg.now()
	guard, err := json.Marshal(x.guard)
	if err != nil {
		return fmt.Errorf("encode guard state: %w", err)
	}
	plan, err := json.Marshal(x.plan)
	if err != nil {
		return fmt.Errorf("encode plan: %w", err)
	}
	var msgs []store.Message
	for i := x.saved; i < len(x.msgs); i++ {
		content, err := model.EncodeBlocks(x.msgs[i].Content)
		if err != nil {
			return fmt.Errorf("encode message %d: %w", i, err)
		}
		msgs = append(msgs, store.Message{Seq: i, Step: x.run.Step, Role: string(x.msgs[i].Role), Content: content, CreatedAt: now})
	}
	p := store.CheckpointParams{
		Fence: x.fence(),
		Now:   now,
		Run: store.RunUpdate{
			Status: x.run.Status, Step: x.run.Step, Messages: len(x.msgs),
			InputTokens: x.run.InputTokens, OutputTokens: x.run.OutputTokens,
			ModelCalls: x.run.ModelCalls, CostNanoUSD: x.run.CostNanoUSD,
			Plan: plan, Guard: guard, ResumeAfter: x.run.ResumeAfter,
			StopReason: x.run.StopReason, StopDetail: x.run.StopDetail, Final: x.run.Final,
			Escalation:   x.run.Escalation,
			LeaseExpires: now.Add(x.r.cfg.LeaseTTL),
		},
		Messages: msgs,
		Events:   x.events,
		Effects:  effects,
		Outbox:   x.outbox,
	}
	// Mid-run, the lease keeper renews the lease; a checkpoint leaves it
	// alone unless the keeper is behind.
	if p.Run.Status == store.StatusRunning && p.Run.ResumeAfter.IsZero() &&
		x.lease.sinceRenewal() < x.r.cfg.LeaseTTL/3 {
		p.Run.KeepLease = true
	}
	for _, o := range opts {
		o(&p)
	}
	start := time.Now()
	if err := x.r.store.Checkpoint(ctx, p); err != nil {
		// A context error means nothing was written (see store.Store);
		// any other failure, a connection lost as it committed say, may
		// have come after the commit.
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			x.writeInDoubt = true
		}
		return fmt.Errorf("checkpoint step %d: %w", x.run.Step, err)
	}
	if obs := x.r.cfg.Observer; obs != nil {
		obs.Checkpoint(x.observed(), time.Since(start))
	}
	x.observe(p.Events)
	x.saved = len(x.msgs)
	x.durable = p.Run
	x.events = x.events[:0]
	x.outbox = nil
	if !p.Run.KeepLease {
		x.lease.renewedAt(now)
	}
	done := x.r.cfg.now()
	if obs := x.r.cfg.StepObserver; obs != nil && x.stepUnsaved {
		obs(StepTiming{RunID: x.run.ID, Step: x.run.Step, Total: done.Sub(x.stepStart),
			Model: x.modelTime, Tools: x.toolTime})
	}
	x.stepUnsaved = false
	x.stepStart, x.modelTime, x.toolTime = done, 0, 0
	return nil
}

func (x *execution) observed() ObservedRun {
	return ObservedRun{ID: x.run.ID, Tenant: x.run.Tenant, Agent: x.agent.Name, Model: x.agent.Model.Name()}
}

// emit queues a trace event for the next write, so it commits with the
// state it describes. data is encoded as JSON: a map, or one of the step's
// event types (trace_events.go).
func (x *execution) emit(typ string, data any) {
	x.events = append(x.events, event(x.run.Step, x.r.cfg.now(), typ, data))
}

func event(step int, now time.Time, typ string, data any) store.Event {
	raw, err := json.Marshal(data)
	if err != nil {
		raw, _ = json.Marshal(map[string]string{"encode_error": err.Error()})
	}
	return store.Event{Step: step, Type: typ, Time: now, Data: raw}
}

// observe hands events a write made durable to the observer (traces,
// metrics).
func (x *execution) observe(events []store.Event) {
	if obs := x.r.cfg.Observer; obs != nil {
		who := x.observed()
		for _, ev := range events {
			obs.Event(who, ev)
		}
	}
}
