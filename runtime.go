package belay

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/belayrun/belay/internal/lease"
	"github.com/belayrun/belay/store"
)

// Config configures a Runtime.
type Config struct {
	// Store holds every run. Required.
	Store store.Store
	// Agents are the agents this runtime can run. Required.
	Agents []*Agent
	// Workers is how many runs one runtime executes at once. Default 16.
	Workers int
	// LeaseTTL is how long a claimed run stays leased without renewal. A
	// worker renews at every step and every LeaseTTL/3 during a long call.
	// Default 30s.
	LeaseTTL time.Duration
	// PollInterval is how often an idle runtime looks for due runs that no
	// wakeup announced (runs started by other processes, expired leases,
	// timers). Default 200ms.
	PollInterval time.Duration
	// Logger receives operational messages. Default: discard.
	Logger *slog.Logger
	// HumanApproval says that people decide approvals (through belay
	// approve, the server or Runtime.Decide). Without it, calls that need
	// approval are denied: a misconfigured deployment refuses rather than
	// refunds. Default false.
	HumanApproval bool
	// ApprovalTTL is how long an approval waits for a decision before it
	// expires and the model is told to escalate. Default 4h.
	ApprovalTTL time.Duration
	// Observer, if set, sees every trace event this runtime makes durable,
	// once, after it commits, and the latency of every checkpoint: metrics
	// and tracing exporters hang here. That is the events of the runs it
	// starts and of their steps, of its sweep that expires approvals, and
	// of the operations made through it (Decide, Resume, MigrateRun,
	// ResolveOutcome, Cancel). An event another process writes (the belay
	// CLI's approve, resume, resolve or migrate, which run no runtime) is in
	// the trace but not seen here. Default: none.
	Observer Observer
	// StepObserver, if set, is called after every checkpointed step with its
	// timings. It runs on the worker's goroutine: keep it cheap.
	StepObserver func(StepTiming)
	// KeepEnded is how long a run is kept once it has ended (done, failed,
	// escalated or canceled). The runtime deletes older ended runs with all
	// they own (Store.PruneRuns): a batch of 200 a minute, or one at each
	// sweep for expired leases (every 5 PollIntervals) while batches come
	// back full. A pruned run's client request id names no run any more:
	// keep runs longer than clients retry. Default 0: runs are kept until an
	// operator prunes them (belay prune).
	KeepEnded time.Duration

	// now, sleep and rand are the clock, the backoff wait and the jitter
	// source; tests inject their own.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
	rand  func(n int64) int64
}

// Observer sees what a runtime records as it records it. Its methods run on
// the goroutine that made the write (a worker's, or the caller's of an
// operation such as Runtime.Decide), after the write committed, so several
// may run at once: keep them cheap, safe for concurrent use, and never
// block.
type Observer interface {
	// Event is one trace event of a run, durable.
	Event(run ObservedRun, ev store.Event)
	// Checkpoint is one fenced write of a run and how long it took.
	Checkpoint(run ObservedRun, d time.Duration)
}

// ObservedRun names the run an observation belongs to.
type ObservedRun struct {
	ID     string
	Tenant string
	Agent  string
	Model  string
}

// StepTiming is how long one step took, split by who spent the time.
type StepTiming struct {
	RunID string
	Step  int
	// Total is the wall time of the step: from the run's previous durable
	// write (or its claim) to the write that makes the step's tool results
	// durable, which also carries the model response that follows them.
	Total time.Duration
	// Model and Tools are the time spent waiting for them within Total; the
	// rest is Belay's overhead.
	Model time.Duration
	Tools time.Duration
}

func (c *Config) applyDefaults() {
	if c.Workers == 0 {
		c.Workers = 16
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 30 * time.Second
	}
	if c.PollInterval == 0 {
		c.PollInterval = 200 * time.Millisecond
	}
	if c.ApprovalTTL == 0 {
		c.ApprovalTTL = DefaultApprovalTTL
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.sleep == nil {
		c.sleep = sleepCtx
	}
	if c.rand == nil {
		c.rand = randInt64N
	}
}

func (c *Config) validate() error {
	if c.Store == nil {
		return errors.New("config: Store is required")
	}
	if len(c.Agents) == 0 {
		return errors.New("config: at least one agent is required")
	}
	if c.Workers < 0 || c.LeaseTTL < 0 || c.PollInterval < 0 || c.KeepEnded < 0 {
		return errors.New("config: Workers, LeaseTTL, PollInterval and KeepEnded must not be negative")
	}
	if c.LeaseTTL < 100*time.Millisecond {
		return fmt.Errorf("config: LeaseTTL %v is too short to renew", c.LeaseTTL)
	}
	return nil
}

// Runtime starts runs and executes them. Several runtimes, in one process or
// many, may share one store: each run is executed by whichever holds its
// lease.
type Runtime struct {
	cfg    Config
	store  store.Store
	agents map[string]*Agent
	// agentNames are the agents' names: a claim takes only their runs.
	agentNames []string
	owner      lease.Owner
	// breakers are per tool name and shared by every run of the runtime.
	breakers  breakers
	switches  killSwitches
	retention retention // the claim loop's alone

	wake chan struct{}

	mu           sync.Mutex
	cancel       context.CancelFunc
	cancelClaims context.CancelFunc
	// stopping tells executions to let go at their next step boundary.
	stopping atomic.Bool
	loopsWG  sync.WaitGroup // the claim loop
	runsWG   sync.WaitGroup // one per run in flight
	active   map[string]bool
}

// New validates cfg and returns a runtime that has not started.
func New(cfg Config) (*Runtime, error) {
	cfg.applyDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Runtime{
		cfg:    cfg,
		store:  cfg.Store,
		agents: make(map[string]*Agent, len(cfg.Agents)),
		owner:  lease.Self(),
		wake:   make(chan struct{}, 1),
		active: make(map[string]bool),
	}
	for _, a := range cfg.Agents {
		if err := a.prepare(); err != nil {
			return nil, err
		}
		if _, dup := r.agents[a.Name]; dup {
			return nil, fmt.Errorf("config: two agents named %q", a.Name)
		}
		r.agents[a.Name] = a
		r.agentNames = append(r.agentNames, a.Name)
	}
	return r, nil
}

// Owner is the lease owner name this runtime writes on the runs it claims.
func (r *Runtime) Owner() string { return r.owner.String() }

// RunRequest asks for a run.
type RunRequest struct {
	// Agent names a registered agent. Required.
	Agent  string
	Tenant string
	User   string
	// ClientRequestID makes the request idempotent: one run per (Tenant,
	// User, ClientRequestID). Asking again returns the existing run.
	ClientRequestID string
	// Input is the user's message.
	Input string
	// DryRun runs reads for real and answers every write with what it would
	// have done.
	DryRun bool
	// Budget overrides the agent's budget field by field (zero fields keep
	// the agent's).
	Budget Budget
	// RequestedBy names who asked for the run; they may not approve its
	// actions unless the policy allows self-approval.
	RequestedBy string
}

// StartRun creates a queued run, or returns the existing run of the same
// client request. created reports which.
func (r *Runtime) StartRun(ctx context.Context, req RunRequest) (run store.Run, created bool, err error) {
	a, ok := r.agents[req.Agent]
	if !ok {
		return store.Run{}, false, fmt.Errorf("start run: no agent named %q in this runtime", req.Agent)
	}
	if req.Tenant == "" {
		req.Tenant = "default"
	}
	now := r.cfg.now()
	b := runBudget{Budget: a.Budget.override(req.Budget)}
	if err := a.checkBudget(b.Budget); err != nil {
		return store.Run{}, false, fmt.Errorf("start run: %w", err)
	}
	if b.Deadline > 0 {
		b.DeadlineAt = now.Add(b.Deadline)
	}
	budget, err := json.Marshal(b)
	if err != nil {
		return store.Run{}, false, fmt.Errorf("start run: %w", err)
	}
	id := newRunID(now)
	p := store.CreateRunParams{
		ID: id, Tenant: req.Tenant, User: req.User, ClientRequestID: req.ClientRequestID,
		Agent: a.Name, AgentVersion: a.Version, Input: req.Input, DryRun: req.DryRun, RequestedBy: req.RequestedBy, Budget: budget,
		Sensitive: a.sensitive, Now: now,
		Events: []store.Event{event(0, now, "run_created", map[string]any{
			"agent": a.Name, "version": a.Version, "user": req.User, "dry_run": req.DryRun})},
	}
	run, created, err = r.store.CreateRun(ctx, p)
	if err != nil {
		return store.Run{}, false, fmt.Errorf("start run: %w", err)
	}
	if created {
		r.operator().observe(run, p.Events)
		r.poke()
	}
	return run, created, nil
}

// Start launches the claim loop: it claims due runs and executes each on its
// own goroutine, up to Workers at once. The claim loop exits when ctx is done
// or Stop is called; the runs in flight exit when ctx is done, or at their
// next step boundary after Stop.
func (r *Runtime) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		return errors.New("runtime already started")
	}
	workCtx, cancelWork := context.WithCancel(ctx)
	claimCtx, cancelClaims := context.WithCancel(workCtx)
	r.cancel = func() { cancelClaims(); cancelWork() }
	r.cancelClaims = cancelClaims
	r.loopsWG.Add(1)
	go func() {
		defer r.loopsWG.Done()
		r.claimLoop(claimCtx, workCtx)
	}()
	if w, ok := r.store.(Waker); ok {
		wake, err := w.Wakeups(claimCtx)
		if err != nil {
			r.cfg.Logger.Warn("no wakeups from the store; polling only", "err", err)
		} else {
			r.loopsWG.Add(1)
			go func() {
				defer r.loopsWG.Done()
				for range wake {
					r.poke()
				}
			}()
		}
	}
	return nil
}

// Waker is implemented by stores that announce due runs (PostgreSQL, with
// LISTEN/NOTIFY), so an idle runtime claims a queued run or a decided
// approval at once instead of at its next poll. The channel closes when ctx
// ends; polling remains the fallback for lost notifications.
type Waker interface {
	Wakeups(ctx context.Context) (<-chan struct{}, error)
}

// Stop shuts down gracefully: it stops claiming, lets each run in flight
// finish its current step and checkpoint it, releases their leases so that
// another worker takes them over at once, and waits. If ctx ends first, the
// runs still in flight are cancelled (their leases expire or are taken over
// by a worker on this host) and Stop returns ctx's error.
func (r *Runtime) Stop(ctx context.Context) error {
	r.mu.Lock()
	cancel, cancelClaims := r.cancel, r.cancelClaims
	r.mu.Unlock()
	if cancel == nil {
		return nil
	}
	r.stopping.Store(true)
	cancelClaims()
	done := make(chan struct{})
	go func() {
		r.loopsWG.Wait()
		r.runsWG.Wait()
		close(done)
	}()
	select {
	case <-done:
		cancel()
		return nil
	case <-ctx.Done():
		cancel()
		<-done
		return ctx.Err()
	}
}

// Drain executes due runs in the calling goroutine until none is due, then
// returns. It is for tests, tools and one-shot workers; a service uses Start.
func (r *Runtime) Drain(ctx context.Context) error {
	r.takeOverDeadOwners(ctx, func(run store.Run) { r.execute(ctx, run, true) })
	if err := r.expireApprovals(ctx); err != nil {
		return err
	}
	for {
		runs, err := r.claim(ctx, r.cfg.Workers)
		if err != nil {
			return err
		}
		if len(runs) == 0 {
			return nil
		}
		var wg sync.WaitGroup
		for _, run := range runs {
			wg.Go(func() { r.execute(ctx, run, false) })
		}
		wg.Wait()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// poke wakes the claim loop without blocking.
func (r *Runtime) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// claimLoop claims runs while ctx lives, or until the store is found
// damaged; the runs it launches live on workCtx, so that stopping the
// claims does not cut a step short.
func (r *Runtime) claimLoop(ctx, workCtx context.Context) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	lastSweep := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-timer.C:
		}
		if now := r.cfg.now(); now.Sub(lastSweep) >= 5*r.cfg.PollInterval {
			lastSweep = now
			r.takeOverDeadOwners(ctx, func(run store.Run) { r.launch(workCtx, run, true) })
			if err := r.expireApprovals(ctx); err != nil && ctx.Err() == nil {
				r.cfg.Logger.Error("expire approvals", "err", err)
			}
			if err := r.retention.prune(ctx, r.store, now, r.cfg.KeepEnded); err != nil && ctx.Err() == nil {
				r.cfg.Logger.Error("prune ended runs", "err", err)
			}
		}
		free := r.cfg.Workers - r.inFlight()
		if free > 0 {
			runs, err := r.claim(ctx, free)
			if errors.Is(err, store.ErrCorrupt) {
				// Every claim would fail the same way, and nothing may be
				// written to the file: the runs in flight end at their next
				// write, and this runtime claims no more.
				r.cfg.Logger.Error("the store is damaged; this runtime claims no more runs", "err", err)
				return
			}
			if err != nil && ctx.Err() == nil {
				r.cfg.Logger.Error("claim runs", "err", err)
			}
			for _, run := range runs {
				r.launch(workCtx, run, false)
			}
			if len(runs) == free {
				r.poke() // more may be due
			}
		}
		timer.Reset(r.cfg.PollInterval)
	}
}

func (r *Runtime) inFlight() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.active)
}

// launch executes run on its own goroutine; when it returns, the claim loop
// is woken so the freed slot takes another run.
func (r *Runtime) launch(ctx context.Context, run store.Run, fromGone bool) {
	r.mu.Lock()
	r.active[run.ID] = true
	r.mu.Unlock()
	r.runsWG.Add(1)
	go func() {
		defer r.runsWG.Done()
		r.execute(ctx, run, fromGone)
		r.mu.Lock()
		delete(r.active, run.ID)
		r.mu.Unlock()
		r.poke()
	}()
}

func (r *Runtime) claim(ctx context.Context, limit int) ([]store.Run, error) {
	if len(r.agentNames) == 0 {
		return nil, nil // no agent to run: an empty filter would take every run
	}
	return r.store.ClaimRuns(ctx, store.ClaimRunsParams{
		Owner: r.owner.String(), Now: r.cfg.now(), TTL: r.cfg.LeaseTTL, Limit: limit,
		Agents: r.agentNames,
	})
}

// expireApprovals is the sweep of approvals nobody decided in time.
func (r *Runtime) expireApprovals(ctx context.Context) error {
	n, err := r.operator().expireApprovals(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		r.cfg.Logger.Info("approvals expired", "count", n)
	}
	return nil
}

// takeOverDeadOwners claims, at once, runs leased by processes on this host
// that no longer exist, so a restarted worker does not wait out the TTL. The
// epoch check in TakeOver makes a race with a live claimer harmless.
func (r *Runtime) takeOverDeadOwners(ctx context.Context, execute func(store.Run)) {
	runs, err := r.store.ListRuns(ctx, store.ListRunsParams{Status: store.StatusRunning, Limit: 1000})
	if err != nil {
		return
	}
	now := r.cfg.now()
	for _, run := range runs {
		if run.LeaseOwner == "" || !run.LeaseExpires.After(now) || !r.owner.Gone(run.LeaseOwner) {
			continue
		}
		if _, ok := r.agents[run.Agent]; !ok {
			continue // a worker that has the agent takes it once its lease expires
		}
		if r.cfg.Workers-r.inFlight() <= 0 {
			return
		}
		claimed, err := r.store.TakeOver(ctx, store.TakeOverParams{
			RunID: run.ID, Epoch: run.LeaseEpoch, Owner: r.owner.String(), Now: now, TTL: r.cfg.LeaseTTL,
		})
		if err != nil {
			continue
		}
		r.cfg.Logger.Info("took over run of a dead worker", "run", run.ID, "from", run.LeaseOwner, "epoch", claimed.LeaseEpoch)
		execute(claimed)
	}
}

// Wait returns the run once it is no longer queued or running: done,
// waiting for a person, paused, or ended otherwise.
func (r *Runtime) Wait(ctx context.Context, tenant, runID string) (store.Run, error) {
	return WaitRun(ctx, r.store, tenant, runID)
}

// WaitRun polls store until the run leaves queued and running.
func WaitRun(ctx context.Context, s store.Store, tenant, runID string) (store.Run, error) {
	delay := time.Millisecond
	for {
		run, err := s.GetRun(ctx, tenant, runID)
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

// newRunID returns a sortable unique id: time first, so listings come out in
// creation order, then randomness.
func newRunID(now time.Time) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("run_%013x%x", now.UnixMilli(), b)
}

// TraceIDs derives W3C trace context from a run: one trace per run, one
// span id per step, the same in every process. Exporters and tools that
// propagate trace context (MCP's _meta) use it so that everything a run did
// lands in one trace.
func TraceIDs(runID string, step int) (traceID [16]byte, stepSpanID [8]byte) {
	t := sha256.Sum256([]byte("belay-trace\x00" + runID))
	copy(traceID[:], t[:16])
	s := sha256.Sum256([]byte(fmt.Sprintf("belay-step\x00%s\x00%d", runID, step)))
	copy(stepSpanID[:], s[:8])
	return traceID, stepSpanID
}

// Agent returns the registered agent of that name.
func (r *Runtime) Agent(name string) (*Agent, bool) {
	a, ok := r.agents[name]
	return a, ok
}
