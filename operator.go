package belay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/belayrun/belay/store"
)

// The tenant an operation names. Every run belongs to one tenant; the
// operations on runs and approvals (Operator's, Runtime.Wait, a store's
// reads) take the tenant to look in.
const (
	// AnyTenant, the empty tenant, names none and so every one: an
	// operation given it finds a run or an approval in whichever tenant
	// holds it, a list holds every tenant's, and the kill switch set for it
	// is the global one, over every tenant. It is for code trusted with
	// every tenant, as the belay CLI is; the API always names its key's
	// tenant. No run belongs to it.
	AnyTenant = ""
	// DefaultTenant is the tenant of a run started without one
	// (RunRequest.Tenant empty), in the library as in belay start.
	DefaultTenant = "default"
)

// Operator makes the changes that happen to runs between their steps: the
// decisions, resumes, migrations, resolved outcomes, cancels and kill
// switches of people, and the expiry of approvals nobody decided. Each
// operation tells the observer of the events it made durable once its
// write has committed.
//
// NewOperator makes one over a bare store, for tools that run no workers
// (the belay CLI): the wall clock, no observer, and no agents, so edited
// arguments are not checked against the tool's schema and a migration
// names its version. Runtime.Operator makes one with the runtime's clock,
// observer and agents, whose changes the runtime's own workers see at once.
type Operator struct {
	store    store.Store
	now      func() time.Time
	observer Observer          // nil: nobody is told
	agents   map[string]*Agent // nil: the agents' tools are not known
	// changed, if set, is called after a change that may make a run due
	// or a kill switch different: a runtime wakes its workers.
	changed func()
}

// NewOperator returns an operator over s, for tools that hold a store but
// run no workers. Runtimes see its changes within their poll interval (at
// once on PostgreSQL, which notifies them).
func NewOperator(s store.Store) *Operator {
	return &Operator{store: s, now: time.Now}
}

// Operator returns the runtime's operator: its store, clock, observer and
// agents; its workers see every change it makes at once.
func (r *Runtime) Operator() *Operator {
	return &Operator{store: r.store, now: r.cfg.now, observer: r.cfg.Observer, agents: r.agents, changed: r.changed}
}

// Wait returns the run once it is no longer queued or running: done,
// waiting for a person, paused, or ended otherwise. It polls the store.
func (op *Operator) Wait(ctx context.Context, tenant, runID string) (store.Run, error) {
	delay := time.Millisecond
	for {
		run, err := op.store.GetRun(ctx, tenant, runID)
		if err != nil {
			return store.Run{}, err
		}
		if run.Status != store.StatusQueued && run.Status != store.StatusRunning {
			return run, nil
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return run, ctx.Err()
		case <-t.C:
		}
		delay = min(delay*2, 50*time.Millisecond)
	}
}

// PendingApprovals lists what waits for a person's decision in a tenant
// (AnyTenant for every tenant), oldest first.
func (op *Operator) PendingApprovals(ctx context.Context, tenant string) ([]store.Approval, error) {
	return op.store.Approvals(ctx, store.ListApprovalsParams{Tenant: tenant, Status: store.ApprovalPending})
}

// done tells the runtime, if any, that something changed.
func (op *Operator) done() {
	if op.changed != nil {
		op.changed()
	}
}

// observe tells the observer of events of run that are durable. Every event
// written outside a step reaches the observer this way, once: call it after
// the write that carried the events returned without error, and only then.
// The run is named as a worker names it for its step events.
func (op *Operator) observe(run store.Run, events []store.Event) {
	if op.observer == nil {
		return
	}
	who := ObservedRun{ID: run.ID, Tenant: run.Tenant, Agent: run.Agent}
	if a, ok := op.agents[run.Agent]; ok {
		who.Model = a.Model.Name()
	}
	for _, ev := range events {
		op.observer.Event(who, ev)
	}
}

// tool is the tool of the agent of run by that name, or nil where the
// operator does not know the agents.
func (op *Operator) tool(run store.Run, name string) *Tool {
	if a, ok := op.agents[run.Agent]; ok {
		return a.tools[name]
	}
	return nil
}

// Resume is Operator.Resume on the runtime's operator.
//
// Deprecated: use rt.Operator().Resume.
func (r *Runtime) Resume(ctx context.Context, tenant, runID string, raise Raise, by string) (store.Run, error) {
	return r.Operator().Resume(ctx, tenant, runID, raise, by)
}

// ResumeRun is Operator.Resume over a bare store.
//
// Deprecated: use NewOperator(s).Resume.
func ResumeRun(ctx context.Context, s store.Store, tenant, runID string, raise Raise, by string) (store.Run, error) {
	return NewOperator(s).Resume(ctx, tenant, runID, raise, by)
}

// Resume continues a run that paused for a person (a budget or turn limit,
// a deadline, a failed step), first raising its budget by raise, and
// queues it; whichever worker claims it next continues it. by names who
// decided, as "human:<id>"; it is recorded in the trace.
func (op *Operator) Resume(ctx context.Context, tenant, runID string, raise Raise, by string) (store.Run, error) {
	now := op.now()
	run, err := op.store.GetRun(ctx, tenant, runID)
	if err != nil {
		return store.Run{}, fmt.Errorf("resume: %w", err)
	}
	var b runBudget
	if len(run.Budget) > 0 {
		if err := json.Unmarshal(run.Budget, &b); err != nil {
			return store.Run{}, fmt.Errorf("resume: budget of run %s: %w", runID, err)
		}
	}
	b = b.raise(raise, now)
	budget, err := json.Marshal(b)
	if err != nil {
		return store.Run{}, fmt.Errorf("resume: %w", err)
	}
	p := store.ResumeRunParams{
		Tenant: tenant, RunID: runID, Now: now, From: []store.Status{store.StatusPaused}, Budget: budget,
		Events: []store.Event{event(run.Step, now, store.EventResumed, store.ResumedData{
			By: by, StopReason: run.StopReason, AddTurns: raise.Turns, AddUSD: raise.USD,
			AddInputTokens: raise.InputTokens, AddOutputTokens: raise.OutputTokens, AddTimeS: raise.Time.Seconds(),
		})},
	}
	run, err = op.store.ResumeRun(ctx, p)
	if err != nil {
		return store.Run{}, fmt.Errorf("resume: %w", err)
	}
	op.observe(run, p.Events)
	op.done()
	return run, nil
}

// ErrUnknownAgent is returned by Runtime.MigrateRun for a run of an agent
// this runtime does not have: it knows no version to move the run to.
var ErrUnknownAgent = errors.New("no agent of that name in this runtime")

// MigrateRun moves a version_mismatch run to the version of the agent this
// runtime has under the run's agent name.
//
// Deprecated: use rt.Operator().Migrate with an empty version.
func (r *Runtime) MigrateRun(ctx context.Context, tenant, runID, by string) (store.Run, error) {
	return r.Operator().Migrate(ctx, tenant, runID, "", by)
}

// MigrateRun is Operator.Migrate over a bare store.
//
// Deprecated: use NewOperator(s).Migrate.
func MigrateRun(ctx context.Context, s store.Store, tenant, runID, toVersion, by string) (store.Run, error) {
	return NewOperator(s).Migrate(ctx, tenant, runID, toVersion, by)
}

// Migrate is the explicit migration a run needs to continue on another
// agent version: a run paused with stop reason version_mismatch is moved to
// version to and queued. It continues from its checkpoint, its messages as
// they are, under the new instructions and tools. An empty to is the
// version of the operator's own agent of that name (a runtime's operator
// knows its agents; one over a bare store must name the version: the one
// the workers run, which the run's stop detail names). A run in any other
// state is refused with store.ErrWrongStatus and left as it is; a worker on
// yet another version pauses the run again, naming both. by names who
// decided, as "human:<id>"; the trace records a "migrated" event with both
// versions.
func (op *Operator) Migrate(ctx context.Context, tenant, runID, to, by string) (store.Run, error) {
	run, err := op.store.GetRun(ctx, tenant, runID)
	if err != nil {
		return store.Run{}, fmt.Errorf("migrate: %w", err)
	}
	if to == "" {
		if op.agents == nil {
			return store.Run{}, errors.New("migrate: no version to migrate to")
		}
		a, ok := op.agents[run.Agent]
		if !ok {
			return store.Run{}, fmt.Errorf("migrate: run %s is a run of agent %q: %w", runID, run.Agent, ErrUnknownAgent)
		}
		to = a.Version
	}
	run, err = op.migrate(ctx, run, to, by)
	if err != nil {
		return store.Run{}, err
	}
	op.done()
	return run, nil
}

func (op *Operator) migrate(ctx context.Context, run store.Run, to, by string) (store.Run, error) {
	if run.Status != store.StatusPaused || run.StopReason != "version_mismatch" {
		return store.Run{}, fmt.Errorf("migrate: run %s is %s (%s), not paused on a version mismatch: %w",
			run.ID, run.Status, run.StopReason, store.ErrWrongStatus)
	}
	if run.AgentVersion == to {
		// Another worker paused it; a resume, not a migration, continues it
		// on its own version.
		return store.Run{}, fmt.Errorf("migrate: run %s is on version %s already; resume it to continue on that version", run.ID, to)
	}
	now := op.now()
	// The tools of version to are known when this process serves it; the
	// run then records them for a later version that continues same tools.
	tools := ""
	if a, ok := op.agents[run.Agent]; ok && a.Version == to {
		tools = a.toolPrint
	}
	p := store.ResumeRunParams{
		Tenant: run.Tenant, RunID: run.ID, Now: now, From: []store.Status{store.StatusPaused}, StopReason: "version_mismatch",
		AgentVersion: to,
		Events: []store.Event{event(run.Step, now, store.EventMigrated, store.MigratedData{
			By: by, Agent: run.Agent, From: run.AgentVersion, To: to, Tools: tools})},
	}
	migrated, err := op.store.ResumeRun(ctx, p)
	if err != nil {
		return store.Run{}, fmt.Errorf("migrate: %w", err)
	}
	op.observe(migrated, p.Events)
	return migrated, nil
}

// Outcome is a person's answer about a side effect whose outcome the run
// could not find out: it landed (with what result), or it did not.
type Outcome struct {
	// Key is the effect's idempotency key, from the escalation packet.
	Key string
	// Applied says the effect happened downstream.
	Applied bool
	// Result is what the model is told the call returned when Applied;
	// default {"ok":true}.
	Result json.RawMessage
}

// ResolveOutcome is Operator.ResolveOutcome over a bare store.
//
// Deprecated: use NewOperator(s).ResolveOutcome.
func ResolveOutcome(ctx context.Context, s store.Store, tenant, runID string, o Outcome, by string) (store.Run, error) {
	return NewOperator(s).ResolveOutcome(ctx, tenant, runID, o, by)
}

// ResolveOutcome is Operator.ResolveOutcome on the runtime's operator.
//
// Deprecated: use rt.Operator().ResolveOutcome.
func (r *Runtime) ResolveOutcome(ctx context.Context, tenant, runID string, o Outcome, by string) (store.Run, error) {
	return r.Operator().ResolveOutcome(ctx, tenant, runID, o, by)
}

// ResolveOutcome records a person's answer for a run paused on an unknown
// outcome and queues it. An applied effect is recorded done, so the run
// continues with its result and never calls again; one that did not happen
// is recorded failed, so the run calls it again under the same key. by
// names who decided.
func (op *Operator) ResolveOutcome(ctx context.Context, tenant, runID string, o Outcome, by string) (store.Run, error) {
	run, err := op.resolve(ctx, tenant, runID, o, by)
	if err != nil {
		return store.Run{}, err
	}
	op.done()
	return run, nil
}

func (op *Operator) resolve(ctx context.Context, tenant, runID string, o Outcome, by string) (store.Run, error) {
	run, err := op.store.GetRun(ctx, tenant, runID)
	if err != nil {
		return store.Run{}, fmt.Errorf("resolve: %w", err)
	}
	if run.Status != store.StatusPaused || run.StopReason != "unknown_outcome" {
		return store.Run{}, fmt.Errorf("resolve: run %s is %s (%s), not paused on an unknown outcome", runID, run.Status, run.StopReason)
	}
	effects, err := op.store.Effects(ctx, run.Tenant, runID)
	if err != nil {
		return store.Run{}, fmt.Errorf("resolve: %w", err)
	}
	i := slices.IndexFunc(effects, func(e store.Effect) bool { return e.Key == o.Key })
	if i < 0 {
		return store.Run{}, fmt.Errorf("resolve: run %s has no side effect with key %s (see its packet: belay show %s)", runID, o.Key, runID)
	}
	if st := effects[i].State; st != store.EffectPending && st != store.EffectUnknown {
		return store.Run{}, fmt.Errorf("resolve: the side effect %s is %s, not unknown", o.Key, st)
	}
	u := store.EffectUpdate{Tenant: run.Tenant, Key: o.Key, State: store.EffectFailed,
		Result: json.RawMessage(`{"ok":false,"error":"a person found that it did not happen"}`)}
	if o.Applied {
		u.State, u.Result = store.EffectDone, o.Result
		if len(u.Result) == 0 {
			u.Result = json.RawMessage(`{"ok":true}`)
		}
		if !json.Valid(u.Result) {
			return store.Run{}, errors.New("resolve: the result is not valid JSON")
		}
	}
	now := op.now()
	p := store.ResumeRunParams{
		Tenant: run.Tenant, RunID: runID, Now: now, From: []store.Status{store.StatusPaused},
		Effects: []store.EffectUpdate{u},
		Events: []store.Event{event(run.Step, now, store.EventOutcomeResolved, store.OutcomeResolvedData{
			Key: o.Key, Tool: effects[i].Tool, Applied: o.Applied, By: by})},
	}
	resolved, err := op.store.ResumeRun(ctx, p)
	if err != nil {
		return store.Run{}, err
	}
	op.observe(resolved, p.Events)
	return resolved, nil
}

// ErrCancelUnsupported is returned by Cancel on a store that cannot cancel
// runs.
var ErrCancelUnsupported = errors.New("this store cannot cancel runs")

// Cancel is Operator.Cancel on the runtime's operator.
//
// Deprecated: use rt.Operator().Cancel.
func (r *Runtime) Cancel(ctx context.Context, tenant, runID, by, note string) (store.Run, error) {
	return r.Operator().Cancel(ctx, tenant, runID, by, note)
}

// Cancel ends a run that has not ended: its pending approvals are rejected
// with the note, its pending waits (questions, events, results) are closed
// as canceled, so a later answer is refused saying the run was canceled,
// and a worker holding it finds its next write refused and
// lets go. A call already on its way to a tool is not recalled; its ledger
// intent stays in the run's effects for a person to check. by names who
// canceled, as "human:<id>".
func (op *Operator) Cancel(ctx context.Context, tenant, runID, by, note string) (store.Run, error) {
	cs, ok := op.store.(store.Canceler)
	if !ok {
		return store.Run{}, ErrCancelUnsupported
	}
	run, err := op.store.GetRun(ctx, tenant, runID)
	if err != nil {
		return store.Run{}, fmt.Errorf("cancel: %w", err)
	}
	now := op.now()
	payload, _ := json.Marshal(map[string]any{"run_id": run.ID, "tenant": run.Tenant, "agent": run.Agent, "user": run.User,
		"status": store.StatusCanceled, "reason": "canceled", "by": by, "note": note, "steps": run.Step})
	p := store.CancelRunParams{Tenant: tenant, RunID: runID, By: by, Note: note, Now: now,
		Events: []store.Event{event(run.Step, now, store.EventCanceled, store.CanceledData{By: by, Note: note, Was: run.Status})},
		Outbox: []store.OutboxMessage{{Kind: "run_finished", Payload: payload}}}
	run, err = cs.CancelRun(ctx, p)
	if err != nil {
		return store.Run{}, fmt.Errorf("cancel: %w", err)
	}
	op.observe(run, p.Events)
	return run, nil
}
