package belay

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/belayrun/belay/internal/owner"
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
	// Clock is the runtime's time: when runs start, leases, approvals and
	// waits expire, timers come due. Every process of one store must keep
	// the same time, to within a lease's margin. Default time.Now; belay
	// demo runs its processes a day ahead to show a reply that comes the
	// next day.
	Clock func() time.Time

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
		c.now = c.Clock
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
	cfg   Config
	store store.Store
	// waiter is the store's waits, nil if it keeps none (then no agent
	// may wait: New refuses it).
	waiter store.Waiter
	agents map[string]*Agent
	// agentNames are the agents' names: a claim takes only their runs.
	agentNames []string
	owner      owner.Owner
	// breakers are per tool name and shared by every run of the runtime.
	breakers breakers
	// fleet, if the store keeps breakers, replaces breakers: one breaker
	// per tool for every worker of the store.
	fleet    *fleetBreakers
	switches killSwitches
	// spendCaps are the tenants' spend caps as last read from the store.
	spendCaps spendCaps
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
		owner:  owner.Self(),
		wake:   make(chan struct{}, 1),
		active: make(map[string]bool),
	}
	for _, a := range cfg.Agents {
		if err := a.prepare(); err != nil {
			return nil, err
		}
		if err := r.checkLimits(a); err != nil {
			return nil, err
		}
		if _, dup := r.agents[a.Name]; dup {
			return nil, fmt.Errorf("config: two agents named %q", a.Name)
		}
		r.agents[a.Name] = a
		r.agentNames = append(r.agentNames, a.Name)
	}
	r.waiter, _ = cfg.Store.(store.Waiter)
	if k, ok := cfg.Store.(store.BreakerKeeper); ok {
		r.fleet = &fleetBreakers{keeper: k}
	}
	for _, a := range cfg.Agents {
		if a.waits() && r.waiter == nil {
			return nil, fmt.Errorf("config: agent %q waits (Conversation, Events, People or a Deferred tool), and %T keeps no waits; use the SQLite or PostgreSQL store", a.Name, cfg.Store)
		}
	}
	return r, nil
}

// Owner is the lease owner name this runtime writes on the runs it claims.
func (r *Runtime) Owner() string { return r.owner.String() }

// RunRequest asks for a run.
type RunRequest struct {
	// Agent names a registered agent. Required.
	Agent string
	// Tenant owns the run: only its API keys see it. Default DefaultTenant.
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
	// NotBefore, if set and later than now, starts the run then: it is
	// created paused until that time (stop reason not_before), on the
	// store's timer, and any worker claims it once it is due.
	NotBefore time.Time
	// ConcurrencyKey, if set, names what the run acts on (a customer, an
	// order): at most ConcurrencyLimit runs of the tenant with the same key
	// are in a step at once, across every worker of the store. The others
	// stay queued, holding nothing, and are claimed as holders let go.
	// Default: none.
	ConcurrencyKey string
	// ConcurrencyLimit is how many runs of ConcurrencyKey may run at once.
	// Default 1.
	ConcurrencyLimit int
	// Priority orders the tenant's due runs: higher goes first. Tenants
	// still take turns (see the README's Flow control). Default 0.
	Priority int
}

// StartRun creates a queued run, or returns the existing run of the same
// client request. created reports which.
func (r *Runtime) StartRun(ctx context.Context, req RunRequest) (run store.Run, created bool, err error) {
	return r.startRun(ctx, req)
}

// startRun is StartRun, writing the events more after run_created, in the
// same transaction: what started the run (a schedule's firing).
func (r *Runtime) startRun(ctx context.Context, req RunRequest, more ...store.Event) (run store.Run, created bool, err error) {
	a, ok := r.agents[req.Agent]
	if !ok {
		return store.Run{}, false, fmt.Errorf("start run: no agent named %q in this runtime", req.Agent)
	}
	if req.Tenant == "" {
		req.Tenant = DefaultTenant
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
	if req.ConcurrencyLimit < 0 {
		return store.Run{}, false, fmt.Errorf("start run: concurrency limit %d: want 0 (the default, one run at a time) or more", req.ConcurrencyLimit)
	}
	id := newRunID(now)
	p := store.CreateRunParams{
		ID: id, Tenant: req.Tenant, User: req.User, ClientRequestID: req.ClientRequestID,
		Agent: a.Name, AgentVersion: a.Version, Input: req.Input, DryRun: req.DryRun, RequestedBy: req.RequestedBy, Budget: budget,
		ConcurrencyKey: req.ConcurrencyKey, ConcurrencyLimit: req.ConcurrencyLimit, Priority: req.Priority,
		Sensitive: a.sensitive, NotBefore: req.NotBefore, Now: now,
		Events: append([]store.Event{event(0, now, store.EventRunCreated, store.RunCreatedData{
			Agent: a.Name, Version: a.Version, Tools: a.toolPrint, User: req.User, DryRun: req.DryRun})}, more...),
	}
	run, created, err = r.store.CreateRun(ctx, p)
	if err != nil {
		return store.Run{}, false, fmt.Errorf("start run: %w", err)
	}
	if created {
		r.Operator().observe(run, p.Events)
		r.poke()
	}
	return run, created, nil
}

// Start launches the runtime's background loops, each on a goroutine of
// its own:
//
//   - the claim loop claims due runs and executes each on its own
//     goroutine, up to Workers at once, and sweeps for dead owners, expired
//     approvals and ended runs to prune; it exits when ctx is done, when
//     Stop is called, or when the store is found damaged;
//   - with a store that announces due runs (Waker), a loop that wakes the
//     claim loop on each announcement; it exits when the claims stop;
//   - each run in flight keeps its lease (lease.go) and exits when ctx is
//     done, at its next step boundary after Stop, or when its lease is lost
//     or runs out.
//
// Stop waits for all of them.
func (r *Runtime) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		return errors.New("runtime already started")
	}
	if err := r.writeAgentLimits(ctx); err != nil {
		return err
	}
	workCtx, cancelWork := context.WithCancel(ctx)
	claimCtx, cancelClaims := context.WithCancel(workCtx)
	r.cancel = func() { cancelClaims(); cancelWork() }
	r.cancelClaims = cancelClaims
	r.loopsWG.Add(1)
	go func() {
		defer r.loopsWG.Done()
		r.claimLoop(claimCtx, workCtx)
		// The claim loop may end on its own (a damaged store): what serves
		// it ends with it.
		cancelClaims()
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
	if _, err := r.Operator().expireWaits(ctx); err != nil {
		return err
	}
	if _, err := r.fireSchedules(ctx); err != nil {
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

// Wait is Operator.Wait on the runtime's operator.
//
// Deprecated: use rt.Operator().Wait.
func (r *Runtime) Wait(ctx context.Context, tenant, runID string) (store.Run, error) {
	return r.Operator().Wait(ctx, tenant, runID)
}

// WaitRun is Operator.Wait over a bare store.
//
// Deprecated: use NewOperator(s).Wait.
func WaitRun(ctx context.Context, s store.Store, tenant, runID string) (store.Run, error) {
	return NewOperator(s).Wait(ctx, tenant, runID)
}

// runIDClock keeps the ids a process makes in the order it makes them:
// within one millisecond, and when the clock steps back, each id is the
// last one plus one, as ULIDs do.
var runIDClock struct {
	sync.Mutex
	ms   int64
	tail uint64
}

// newRunID returns a sortable unique id: the millisecond first, so listings
// (ordered by id) come out in creation order, then 48 bits that start
// random each millisecond and count up within it. Ids made by different
// processes in the same millisecond are ordered at random.
func newRunID(now time.Time) string {
	ms := now.UnixMilli()
	runIDClock.Lock()
	defer runIDClock.Unlock()
	if ms <= runIDClock.ms && runIDClock.tail < 1<<48-1 {
		ms = runIDClock.ms
		runIDClock.tail++
	} else {
		var b [8]byte
		_, _ = rand.Read(b[:])
		// The top bit is left clear so that the millisecond's ids have room
		// to count up.
		runIDClock.ms, runIDClock.tail = ms, binary.BigEndian.Uint64(b[:])&(1<<47-1)
	}
	return fmt.Sprintf("run_%013x%012x", ms, runIDClock.tail)
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

// ToolSpanID is the span id of a tool call made under a lease epoch (the
// call's CallInfo.FencingToken): the span the tracing package exports for
// it, and the one MCP servers are told in the call's traceparent, so their
// spans join the run's trace under it. Every attempt of the call under one
// lease gets the same id; a worker that takes the run over and makes the
// call again makes another span.
func ToolSpanID(runID string, step int, toolUseID string, epoch int64) [8]byte {
	var id [8]byte
	h := sha256.Sum256([]byte("belay span\x00" + runID + "\x00" + strconv.Itoa(step) + "\x00" + toolUseID +
		"\x00" + strconv.FormatInt(epoch, 10)))
	copy(id[:], h[:8])
	if id == [8]byte{} {
		id[7] = 1 // all zeros is the one invalid span id
	}
	return id
}

// Agent returns the registered agent of that name.
func (r *Runtime) Agent(name string) (*Agent, bool) {
	a, ok := r.agents[name]
	return a, ok
}

// AgentNames returns the names of the registered agents, in the order they
// were configured.
func (r *Runtime) AgentNames() []string { return slices.Clone(r.agentNames) }
