package belay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// The loop of a step: claim (execute), load the run from the store, the
// guards and the model call (think), the tools (dispatch.go), and
// verification (finish). What the loop writes goes through checkpoint.go,
// its lease is lease.go's, its side effects ledger.go's and its approvals
// gate.go's.

// execution is one worker's hold on one run, from claim to letting go. Its
// fields mirror the run's row; every change reaches the store through write,
// fenced by the lease epoch.
type execution struct {
	r     *Runtime
	agent *Agent
	run   store.Run
	msgs  []model.Message
	// saved is how many of msgs are in the store.
	saved int
	// durable is the run's state as its last write left it (or as claimed):
	// what a release writes back, so that a step cut short hands over no
	// change its own write did not make durable.
	durable store.RunUpdate
	// writeInDoubt reports a write that failed otherwise than by its
	// context ending: it may have committed, so durable may be behind the
	// store.
	writeInDoubt bool
	guard        guardState
	plan         planState
	events       []store.Event
	outbox       []store.OutboxMessage
	// applied reports that the tool call in progress applied a side effect.
	applied bool
	// turnResults and unknownCall are, for an escalation in the middle of
	// a turn, the results its calls had so far and the call whose outcome
	// is unknown: they are in no message yet.
	turnResults []model.Block
	unknownCall string
	// customerMessage, if set, is what an escalation tells the customer
	// instead of the agent's CustomerMessage.
	customerMessage string

	// stepUnsaved reports a dispatched step whose tool results the next
	// write makes durable; the step ends there, and its timing is observed.
	stepUnsaved bool
	stepStart   time.Time
	modelTime   time.Duration
	toolTime    time.Duration

	// lease is the worker's own view of its lease, and cancel ends the
	// execution with a cause: the lease keeper and the calls end it when the
	// lease is lost or runs out.
	lease  *leaseClock
	cancel context.CancelCauseFunc
	// goneEpoch, if not zero, is the epoch of an owner the run was taken
	// from because its process was proven gone.
	goneEpoch int64
	// abandoned reports a call given up on while it may still run; ended
	// are the keys of side effects whose last call returned without an
	// outcome, cut short by the execution's end.
	abandoned bool
	ended     []string
}

// errStop ends an execution after its final write; it is not a failure.
var errStop = errors.New("run let go")

// execute runs a claimed run until it lets go. fromGone says the run was
// taken from an owner proven gone (TakeOver): nothing that owner sent can
// be in flight any more.
func (r *Runtime) execute(ctx context.Context, run store.Run, fromGone bool) {
	a, ok := r.agents[run.Agent]
	if !ok {
		// Claims take only this runtime's agents; a run reaching here anyway
		// is handed back at once, as it was, for a worker that has the agent.
		r.cfg.Logger.Error("claimed a run of an agent this runtime does not have; letting go of it", "run", run.ID, "agent", run.Agent)
		_ = r.store.Checkpoint(ctx, store.CheckpointParams{Fence: store.Fence{RunID: run.ID, Owner: run.LeaseOwner, Epoch: run.LeaseEpoch},
			Now: r.cfg.now(), Run: stateOf(run)})
		return
	}
	// The claim set the lease to expire a TTL after it was sent.
	x := &execution{r: r, agent: a, run: run,
		lease: newLeaseClock(r.cfg.now, r.cfg.LeaseTTL, run.LeaseExpires.Add(-r.cfg.LeaseTTL))}
	if fromGone {
		x.goneEpoch = run.LeaseEpoch - 1
	}
	ctx, x.cancel = context.WithCancelCause(ctx)
	defer x.cancel(nil)
	go x.keepLease(ctx)

	err := x.loopContained(ctx)
	var hook *hookError
	switch {
	case err == nil, errors.Is(err, errStop):
	case errors.Is(err, store.ErrLeaseLost), errors.Is(context.Cause(ctx), store.ErrLeaseLost):
		// Found by a write or by the lease keeper: either way another worker
		// has the run, and this one writes nothing more.
		x.log().Warn("lease lost; another worker has the run")
	case ctx.Err() != nil && context.Cause(ctx) != ctx.Err():
		x.log().Error("gave up the run", "cause", context.Cause(ctx))
	case ctx.Err() != nil:
		// The release outlives the cancel, but not the lease: a store that
		// does not answer (cut off by the network) cannot hold the worker,
		// and past the lease the run is no longer this worker's to release.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), max(x.lease.remaining(), 0))
		x.release(rctx)
		cancel()
	case errors.As(err, &hook):
		x.log().Error("run step: the agent's own code failed; the run waits for a person", "err", err)
		x.pauseForFix(ctx, hook)
	default:
		// The store, most likely: the lease runs out and a worker takes the
		// run again.
		x.log().Error("run step", "err", err)
	}
}

// hookError is a failure of the agent's own code: its policy failed or
// gave no verdict, or its model, a tool's hook or a requirement's check
// panicked. Run again, the step would fail again, each time the lease ran
// out, for ever; the run waits for a person instead.
type hookError struct{ err error }

func (e *hookError) Error() string { return e.err.Error() }
func (e *hookError) Unwrap() error { return e.err }

// loopContained is loop with a panic of the agent's code (tools are
// contained where they are called) turned into a hookError, so it stops
// this run, not the worker process with every run in flight on it.
func (x *execution) loopContained(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			x.log().Error("panic in a run's step", "panic", p, "stack", string(debug.Stack()))
			err = &hookError{fmt.Errorf("panic: %v", p)}
		}
	}()
	return x.loop(ctx)
}

// log is the runtime's logger with the run's coordinates on every line.
func (x *execution) log() *slog.Logger {
	return x.r.cfg.Logger.With("run", x.run.ID, "tenant", x.run.Tenant, "step", x.run.Step, "epoch", x.run.LeaseEpoch)
}

func (x *execution) info() RunInfo {
	request := x.run.ClientRequestID
	if request == "" && x.guard.Fork != nil {
		// A fork is about the request its parent was started for.
		request = x.guard.Fork.Request
	}
	return RunInfo{ID: x.run.ID, Tenant: x.run.Tenant, User: x.run.User, ClientRequestID: request, Input: x.run.Input}
}

func (x *execution) loop(ctx context.Context) error {
	// A run paused until a time was claimed because the time came: its
	// timer has fired. Kept, it would go with the run's next pause, which
	// would then be due at once, claimed and paused again without end.
	x.run.ResumeAfter = time.Time{}
	if err := x.load(ctx); err != nil {
		return err
	}
	x.durable = stateOf(x.run)
	if x.run.AgentVersion != x.agent.Version {
		continues := slices.Contains(x.agent.Continues, x.run.AgentVersion)
		if !continues {
			same, err := x.sameTools(ctx)
			if err != nil {
				return err
			}
			continues = same
		}
		if continues {
			if err := x.continueVersion(ctx); err != nil {
				return err
			}
		}
	}
	if x.run.AgentVersion != x.agent.Version {
		return x.stop(ctx, store.StatusPaused, "version_mismatch", fmt.Sprintf(
			"run was started on %s version %s, this worker has version %s; it is not resumed into another version without an explicit migration",
			x.agent.Name, x.run.AgentVersion, x.agent.Version))
	}
	x.emit(store.EventClaimed, store.ClaimedData{Epoch: x.run.LeaseEpoch, Owner: x.run.LeaseOwner, Resumed: x.saved > 0,
		TakenFrom: x.run.TakenFrom})
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if x.r.stopping.Load() {
			// Shutting down between steps: the last step is checkpointed;
			// hand the run to another worker at once.
			x.emit(store.EventReleased, store.ReleasedData{Epoch: x.run.LeaseEpoch})
			_ = x.write(ctx, nil, withRelease())
			return errStop
		}
		last := x.msgs[len(x.msgs)-1]
		// A step runs from the run's previous write to the write that makes
		// its tool results durable; a resumed step starts where the worker
		// picked it up.
		if x.stepStart.IsZero() {
			x.stepStart = x.r.cfg.now()
		}
		var err error
		switch {
		case last.Role == model.RoleAssistant && len(model.ToolUses(last.Content)) > 0:
			err = x.dispatch(ctx, last)
		case last.Role == model.RoleAssistant:
			return x.finish(ctx, last)
		default:
			err = x.think(ctx)
		}
		if err != nil {
			return err
		}
	}
}

// load reads the conversation and the guard state back from the store: the
// run resumes from its last checkpoint, not from anything in memory.
func (x *execution) load(ctx context.Context) error {
	rows, err := x.r.store.Messages(ctx, x.run.ID)
	if err != nil {
		return fmt.Errorf("load messages: %w", err)
	}
	for _, row := range rows {
		blocks, err := model.DecodeBlocks(row.Content)
		if err != nil {
			return fmt.Errorf("load message %d: %w", row.Seq, err)
		}
		x.msgs = append(x.msgs, model.Message{Role: model.Role(row.Role), Content: blocks})
	}
	x.saved = len(x.msgs)
	if len(x.msgs) == 0 {
		x.msgs = []model.Message{{Role: model.RoleUser, Content: []model.Block{model.TextBlock(x.run.Input)}}}
	}
	if len(x.run.Guard) > 0 {
		if err := json.Unmarshal(x.run.Guard, &x.guard); err != nil {
			return fmt.Errorf("load guard state: %w", err)
		}
		if x.guard.Rebuild {
			x.rebuildGuard()
		}
	}
	if len(x.run.Plan) > 0 {
		if err := json.Unmarshal(x.run.Plan, &x.plan); err != nil {
			return fmt.Errorf("load plan: %w", err)
		}
	}
	return nil
}

// think runs the guards, calls the model and makes its response durable
// before any tool runs, so a crash never pays for the same call twice and
// the tool_use ids the tools see stay stable.
func (x *execution) think(ctx context.Context) error {
	engaged, why, err := x.r.killSwitch(ctx, x.run.Tenant)
	if err != nil {
		return err
	}
	if engaged {
		return x.escalate(ctx, store.StatusPaused, "kill_switch",
			"model calls are switched off: "+why+"; the run continues when the switch is released", nil, nil)
	}
	budget, err := x.budget()
	if err != nil {
		return err
	}
	req := model.Request{
		System:    x.agent.Instructions,
		Messages:  x.msgs,
		Tools:     x.agent.toolSpecs(),
		MaxTokens: x.agent.MaxOutputTokens,
	}
	if over := x.checkBudget(ctx, budget, x.agent.Model, req); over != nil {
		return x.escalate(ctx, store.StatusPaused, over.Reason, over.String(), nil, over)
	}
	if err := x.checkSpendCap(ctx, x.agent.Model, req); err != nil {
		return err
	}
	if err := x.admit(ctx, x.agent.Model, req); err != nil {
		return err
	}
	start := x.r.cfg.now()
	used := x.agent.Model
	resp, err := used.Generate(ctx, req)
	if me, ok := model.ClassOf(err); ok && me.Class == model.ClassOverloaded && x.agent.Fallback != nil && ctx.Err() == nil {
		// The primary is overloaded after its own retries: degrade to the
		// fallback for this call, and say so in the trace.
		used = x.agent.Fallback
		x.emit(store.EventModelFallback, store.ModelFallbackData{From: x.agent.Model.Name(), To: used.Name(), Error: err.Error()})
		// The fallback has its own price and its own longest call.
		if over := x.checkBudget(ctx, budget, used, req); over != nil {
			x.modelTime += x.r.cfg.now().Sub(start)
			return x.escalate(ctx, store.StatusPaused, over.Reason, over.String()+" (on the fallback model "+used.Name()+", the primary being overloaded)", nil, over)
		}
		resp, err = used.Generate(ctx, req)
	}
	latency := x.r.cfg.now().Sub(start)
	x.modelTime += latency
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return x.modelFailed(ctx, err)
	}
	x.guard.ModelFailures, x.guard.ModelFailingSince = 0, time.Time{}
	// An empty answer is billed too.
	price, _ := x.agent.Prices.Lookup(used.Name())
	cost := price.Cost(resp.Usage)
	x.recordSpend(ctx, cost)
	x.run.InputTokens += resp.Usage.InputTokens
	x.run.OutputTokens += resp.Usage.OutputTokens
	x.run.ModelCalls++
	x.run.CostNanoUSD += int64(cost)
	if len(resp.Content) == 0 {
		return x.stop(ctx, store.StatusFailed, "empty_response", "the model returned no content")
	}

	text := model.JoinText(resp.Content)
	planChanged := x.plan.update(text)
	data := store.ModelCallData{
		Model: used.Name(), Thought: text, ToolCalls: []store.ToolCallBrief{},
		StopReason: string(resp.StopReason), InputTokens: resp.Usage.InputTokens,
		OutputTokens: resp.Usage.OutputTokens, CostUSD: cost.Dollars(),
		LatencyMS: float64(latency.Microseconds()) / 1000,
	}
	for _, u := range model.ToolUses(resp.Content) {
		data.ToolCalls = append(data.ToolCalls, store.ToolCallBrief{ID: u.ID, Name: u.Name, Args: x.agent.tools[u.Name].redact(u.Input)})
	}
	if planChanged {
		data.Plan, data.PlanVersion = x.plan.Steps, x.plan.Version
	}
	x.emit(store.EventModelCall, data)
	x.msgs = append(x.msgs, model.Message{Role: model.RoleAssistant, Content: resp.Content})
	if resp.StopReason == model.StopMaxTokens && len(data.ToolCalls) > 0 {
		x.guard.CutOff = len(x.msgs)
	}
	return x.write(ctx, nil)
}

// dryRunPlan lists the side effects a dry run would have had, in order.
func (x *execution) dryRunPlan() string {
	var b strings.Builder
	b.WriteString("Plan of actions (dry run; nothing was executed):")
	n := 0
	for _, m := range x.msgs {
		for _, use := range model.ToolUses(m.Content) {
			if t, ok := x.agent.tools[use.Name]; ok && t.Effect.SideEffecting() {
				n++
				fmt.Fprintf(&b, "\n%d. %s %s", n, use.Name, compactJSON(use.Input))
			}
		}
	}
	if n == 0 {
		b.WriteString("\n(no side effects)")
	}
	return b.String()
}

// modelFailed handles a model call that failed after the SDK's own retries:
// load-related failures pause the run until later; a bad request fails it,
// since sending it again cannot help.
// A run whose model call failed for a reason waiting may cure waits a
// random time up to modelRetryBase, up to twice as long after each failure
// in a row, capped at modelRetryMax ("full jitter", so that the runs a
// provider's outage paused together do not come back together), on top of
// the provider's Retry-After if it gave one; after maxModelFailures in a row
// it waits for a person.
const (
	modelRetryBase   = 15 * time.Second
	modelRetryMax    = 10 * time.Minute
	maxModelFailures = 12
)

func (x *execution) modelFailed(ctx context.Context, err error) error {
	me, ok := model.ClassOf(err)
	if !ok || !me.Transient() {
		return x.stop(ctx, store.StatusFailed, "model_error", err.Error())
	}
	// A call that failed may still have been answered, and billed, with
	// nothing to show in the run's cost: failures in a row are bounded.
	x.guard.ModelFailures++
	if x.guard.ModelFailures >= maxModelFailures {
		n := x.guard.ModelFailures
		x.guard.ModelFailures = 0 // a person's resume starts a new count
		return x.escalate(ctx, store.StatusPaused, "model_unavailable", fmt.Sprintf(
			"the model failed %d times in a row, the last with: %v; resume the run once it answers again (belay resume %s)", n, err, x.run.ID), nil, nil)
	}
	window := min(modelRetryBase<<(x.guard.ModelFailures-1), modelRetryMax)
	wait := me.RetryAfter + time.Duration(x.r.cfg.rand(int64(window)+1))
	if me.Class == model.ClassRateLimited {
		x.drainLimits(ctx, max(me.RetryAfter, modelRetryBase))
	}
	if x.agent.Interactive != nil {
		var escalate bool
		if wait, escalate = x.interactiveWait(me, wait); escalate {
			return x.escalateInteractive(ctx, err)
		}
	}
	x.run.ResumeAfter = x.r.cfg.now().Add(wait)
	detail := err.Error()
	if me.Class == model.ClassOverloaded && x.agent.Fallback == nil {
		detail += "; this agent names no fallback model, so its runs wait for this one"
	}
	return x.stop(ctx, store.StatusPaused, string(me.Class), detail)
}

// finish runs verification when the model has stopped asking for tools. Only
// code checking real state can make a run done.
func (x *execution) finish(ctx context.Context, last model.Message) error {
	final := model.JoinText(last.Content)
	var missing []string
	for _, req := range x.agent.Requirements {
		ok, err := req.Check(ctx, x.info())
		data := store.VerifyData{Requirement: req.Name, OK: ok}
		if err != nil {
			data.Error = err.Error()
			ok = false
		}
		x.emit(store.EventVerify, data)
		if !ok {
			missing = append(missing, req.Name)
		}
	}
	x.run.Final = final
	if x.run.DryRun {
		x.run.Final = final + "\n\n" + x.dryRunPlan()
		return x.stop(ctx, store.StatusDone, "dry_run", "nothing was executed: the run's output is its plan")
	}
	if len(missing) > 0 {
		detail, _ := json.Marshal(map[string]any{"complete": false, "missing": missing})
		return x.escalate(ctx, store.StatusEscalated, "unverified", string(detail), missing, nil)
	}
	// The model was told an approval timed out and has answered the
	// customer; what it could not do is now a person's.
	expired, err := x.r.store.Approvals(ctx, store.ListApprovalsParams{Tenant: x.run.Tenant, RunID: x.run.ID, Status: store.ApprovalExpired})
	if err != nil {
		return err
	}
	if len(expired) > 0 {
		var what []string
		for _, a := range expired {
			what = append(what, a.Summary)
		}
		return x.escalate(ctx, store.StatusEscalated, "approval_expired",
			"no one decided in time: "+strings.Join(what, "; "), nil, nil)
	}
	if len(x.agent.Requirements) == 0 {
		// Said as it is: nothing looked at the world.
		return x.stop(ctx, store.StatusDone, "no_requirements",
			"the agent declares no requirements, so no code checked the world: the run is done on the model's word")
	}
	return x.stop(ctx, store.StatusDone, "verified", "")
}

// planState is the plan the model stated, as "PLAN: a; b; c" in its text.
type planState struct {
	Steps   []string `json:"steps,omitempty"`
	Version int      `json:"version"`
}

func (p *planState) update(text string) bool {
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		rest, ok := strings.CutPrefix(line, "PLAN:")
		if !ok {
			continue
		}
		var steps []string
		for s := range strings.SplitSeq(rest, ";") {
			if s = strings.TrimSpace(s); s != "" {
				steps = append(steps, s)
			}
		}
		if len(steps) == 0 || slices.Equal(steps, p.Steps) {
			return false
		}
		p.Steps = steps
		p.Version++
		return true
	}
	return false
}
