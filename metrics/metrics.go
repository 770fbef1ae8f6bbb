// Package metrics exports what Belay's runtimes record as Prometheus
// metrics. It implements belay.Observer, so the series come from the same
// trace events that are the durable record: nothing is counted that the
// trace does not show.
//
//	m := metrics.New(prometheus.DefaultRegisterer)
//	rt, _ := belay.New(belay.Config{..., Observer: m})
//	http.Handle("/metrics", promhttp.Handler())
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// Metrics is a belay.Observer that keeps Prometheus series.
type Metrics struct {
	runsStopped      *prometheus.CounterVec
	steps            *prometheus.CounterVec
	modelCalls       *prometheus.CounterVec
	tokens           *prometheus.CounterVec
	costUSD          *prometheus.CounterVec
	toolCalls        *prometheus.CounterVec
	retries          *prometheus.CounterVec
	breakerOpen      *prometheus.GaugeVec
	breakerChanges   *prometheus.CounterVec
	approvalsAsked   *prometheus.CounterVec
	approvalsDecided *prometheus.CounterVec
	decisionSeconds  *prometheus.HistogramVec
	escalations      *prometheus.CounterVec
	takeovers        *prometheus.CounterVec
	loops            *prometheus.CounterVec
	fallbacks        *prometheus.CounterVec
	checkpoint       *prometheus.HistogramVec
	waitsRequested   *prometheus.CounterVec
	waitsClosed      *prometheus.CounterVec
	waitSeconds      *prometheus.HistogramVec
	scheduleFirings  *prometheus.CounterVec
	scheduleSkipped  *prometheus.CounterVec

	tenants tenantLabels
}

// DefaultMaxTenants is how many tenants keep their own name in the tenant
// label unless Options says otherwise.
const DefaultMaxTenants = 100

// OtherTenants is the tenant label of every tenant seen after the first
// MaxTenants.
const OtherTenants = "other"

// Options configures the series.
type Options struct {
	// MaxTenants bounds the tenant label of the run, step and cost series:
	// the first MaxTenants tenants this process sees keep their name, and
	// the rest share the label OtherTenants, so that a store with
	// thousands of tenants does not make thousands of series per agent.
	// Default DefaultMaxTenants; below 0, every tenant is OtherTenants.
	MaxTenants int
}

// tenantLabels hands out tenant labels: a tenant's name while fewer than
// max have one, OtherTenants after. A tenant keeps the label it got first,
// so its series do not move while the process lives.
type tenantLabels struct {
	mu    sync.Mutex
	max   int
	named map[string]struct{}
}

func (l *tenantLabels) label(tenant string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.named[tenant]; ok {
		return tenant
	}
	if len(l.named) >= l.max {
		return OtherTenants
	}
	l.named[tenant] = struct{}{}
	return tenant
}

var _ belay.Observer = (*Metrics)(nil)

// New registers Belay's series with reg and returns the observer that
// updates them, with the default Options.
func New(reg prometheus.Registerer) *Metrics { return NewWithOptions(reg, Options{}) }

// NewWithOptions is New with options.
func NewWithOptions(reg prometheus.Registerer, o Options) *Metrics {
	if o.MaxTenants == 0 {
		o.MaxTenants = DefaultMaxTenants
	}
	f := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "belay", Name: name, Help: help}, labels)
		reg.MustRegister(c)
		return c
	}
	m := &Metrics{
		runsStopped: f("runs_stopped_total", "Runs that stopped, by status (done, paused, escalated, failed, waiting_approval, canceled) and reason.",
			"agent", "status", "reason", "tenant"),
		steps:          f("steps_total", "Durable steps (checkpoints after tool results).", "agent", "tenant"),
		modelCalls:     f("model_calls_total", "Model calls made durable.", "agent", "model", "tenant"),
		tokens:         f("model_tokens_total", "Model tokens, by direction (input, output).", "agent", "model", "direction", "tenant"),
		costUSD:        f("model_cost_usd_total", "Model cost in dollars, from the price table.", "agent", "model", "tenant"),
		toolCalls:      f("tool_calls_total", "Tool results, by outcome (ok, error).", "agent", "tool", "outcome"),
		retries:        f("tool_retries_total", "Tool attempts retried after a transient failure.", "agent", "tool"),
		breakerChanges: f("breaker_transitions_total", "Circuit breaker state changes.", "tool", "to"),
		approvalsAsked: f("approvals_requested_total", "Approvals requested, by category.", "agent", "category"),
		approvalsDecided: f("approvals_decided_total", "Approval decisions, by category and status (approved, edited, rejected, expired).",
			"category", "status"),
		escalations: f("escalations_total", "Runs stopped for a person, by reason.", "agent", "reason"),
		takeovers:   f("lease_takeovers_total", "Runs a worker took over from another whose lease ran out, or whose process was gone, without its letting go.", "agent"),
		loops:       f("loop_detections_total", "Loop detector firings, by action (replan, escalate).", "agent", "action"),
		fallbacks:   f("model_fallbacks_total", "Model calls answered by the fallback model because the primary was overloaded.", "agent", "from", "to"),
		waitsRequested: f("waits_requested_total", "Waits a run began (for its user's reply, an event, a person, a result from outside), by kind.",
			"agent", "kind"),
		waitsClosed: f("waits_closed_total", "Waits answered or expired, by kind and outcome (answered, expired).", "kind", "outcome"),
		// By agent, not by schedule: schedule names are many and made by
		// users; a schedule's own firings are in its runs' traces.
		scheduleFirings: f("schedule_firings_total", "Schedule firings that started a run, once across workers.", "agent"),
		scheduleSkipped: f("schedule_firings_skipped_total", "Schedule firings that started no run, by reason (overlap: the previous run had not ended; missed: no worker ran at the firing's time).",
			"agent", "reason"),
	}
	m.breakerOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "belay", Name: "breaker_open",
		Help: "1 while a tool's circuit breaker is open or half-open, as last seen by this process."}, []string{"tool"})
	m.decisionSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "belay", Name: "approval_decision_seconds",
		Help: "Time from an approval request to its decision.", Buckets: prometheus.ExponentialBuckets(1, 4, 10)}, []string{"category", "status"})
	m.checkpoint = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "belay", Name: "checkpoint_seconds",
		Help: "Latency of fenced checkpoint writes.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}, []string{"agent"})
	m.waitSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "belay", Name: "wait_answer_seconds",
		Help: "Time from a wait's start to its answer.", Buckets: prometheus.ExponentialBuckets(1, 4, 10)}, []string{"kind"})
	reg.MustRegister(m.breakerOpen, m.decisionSeconds, m.checkpoint, m.waitSeconds)
	m.tenants = tenantLabels{max: max(o.MaxTenants, 0), named: map[string]struct{}{}}
	return m
}

// Checkpoint observes a checkpoint's latency.
func (m *Metrics) Checkpoint(run belay.ObservedRun, d time.Duration) {
	m.checkpoint.WithLabelValues(run.Agent).Observe(d.Seconds())
}

// Event updates the series an event stands for. Its data is decoded into
// the catalogue's type for its kind; a malformed one counts as empty.
func (m *Metrics) Event(run belay.ObservedRun, ev store.Event) {
	switch ev.Type {
	case store.EventModelCall:
		d, _ := store.DecodeEvent[store.ModelCallData](ev)
		// The model that answered: the agent's fallback, when it stood in.
		answered := d.Model
		if answered == "" {
			answered = run.Model
		}
		tenant := m.tenants.label(run.Tenant)
		m.modelCalls.WithLabelValues(run.Agent, answered, tenant).Inc()
		m.tokens.WithLabelValues(run.Agent, answered, "input", tenant).Add(float64(d.InputTokens))
		m.tokens.WithLabelValues(run.Agent, answered, "output", tenant).Add(float64(d.OutputTokens))
		m.costUSD.WithLabelValues(run.Agent, answered, tenant).Add(d.CostUSD)
	case store.EventCheckpoint:
		m.steps.WithLabelValues(run.Agent, m.tenants.label(run.Tenant)).Inc()
	case store.EventToolResult:
		d, _ := store.DecodeEvent[store.ToolResultData](ev)
		outcome := "ok"
		if d.IsError {
			outcome = "error"
		}
		tool := d.Tool
		if d.UnknownTool {
			// Named by the model, not the agent: as many names as it
			// cares to invent would each be a series.
			tool = "(unknown)"
		}
		m.toolCalls.WithLabelValues(run.Agent, tool, outcome).Inc()
	case store.EventToolRetry:
		d, _ := store.DecodeEvent[store.ToolRetryData](ev)
		m.retries.WithLabelValues(run.Agent, d.Tool).Inc()
	case store.EventBreaker:
		d, _ := store.DecodeEvent[store.BreakerData](ev)
		m.breakerChanges.WithLabelValues(d.Tool, d.To).Inc()
		open := 0.0
		if d.To != "closed" {
			open = 1
		}
		m.breakerOpen.WithLabelValues(d.Tool).Set(open)
	case store.EventApprovalRequested:
		d, _ := store.DecodeEvent[store.ApprovalRequestedData](ev)
		m.approvalsAsked.WithLabelValues(run.Agent, d.Category).Inc()
	case store.EventApprovalDecided:
		d, _ := store.DecodeEvent[store.ApprovalDecidedData](ev)
		m.approvalsDecided.WithLabelValues(d.Category, string(d.Status)).Inc()
		m.decisionSeconds.WithLabelValues(d.Category, string(d.Status)).Observe(d.DecisionS)
	case store.EventApprovalExpired:
		d, _ := store.DecodeEvent[store.ApprovalExpiredData](ev)
		m.approvalsDecided.WithLabelValues(d.Category, string(store.ApprovalExpired)).Inc()
	case store.EventWaitRequested:
		d, _ := store.DecodeEvent[store.WaitRequestedData](ev)
		m.waitsRequested.WithLabelValues(run.Agent, string(d.Kind)).Inc()
	case store.EventWaitAnswered:
		d, _ := store.DecodeEvent[store.WaitAnsweredData](ev)
		m.waitsClosed.WithLabelValues(string(d.Kind), "answered").Inc()
		m.waitSeconds.WithLabelValues(string(d.Kind)).Observe(d.WaitedS)
	case store.EventScheduleFired:
		m.scheduleFirings.WithLabelValues(run.Agent).Inc()
	case store.EventScheduleSkipped:
		d, _ := store.DecodeEvent[store.ScheduleSkippedData](ev)
		m.scheduleSkipped.WithLabelValues(run.Agent, d.Reason).Inc()
	case store.EventWaitExpired:
		d, _ := store.DecodeEvent[store.WaitExpiredData](ev)
		m.waitsClosed.WithLabelValues(string(d.Kind), "expired").Inc()
	case store.EventClaimed:
		// A run claimed again after it waited (for a person, a timer) or was
		// released is not taken over: only a lease its owner never let go.
		if d, _ := store.DecodeEvent[store.ClaimedData](ev); d.TakenFrom != "" {
			m.takeovers.WithLabelValues(run.Agent).Inc()
		}
	case store.EventModelFallback:
		d, _ := store.DecodeEvent[store.ModelFallbackData](ev)
		m.fallbacks.WithLabelValues(run.Agent, d.From, d.To).Inc()
	case store.EventLoopDetected:
		d, _ := store.DecodeEvent[store.LoopDetectedData](ev)
		m.loops.WithLabelValues(run.Agent, d.Action).Inc()
	case store.EventCanceled:
		// A person ended the run; a worker that held it writes no stop.
		m.runsStopped.WithLabelValues(run.Agent, string(store.StatusCanceled), "canceled", m.tenants.label(run.Tenant)).Inc()
	case store.EventStop:
		d, _ := store.DecodeEvent[store.StopData](ev)
		status, reason := d.Status, d.Reason
		m.runsStopped.WithLabelValues(run.Agent, string(status), reason, m.tenants.label(run.Tenant)).Inc()
		if status == store.StatusEscalated || (status == store.StatusPaused && reason != "rate_limited" &&
			reason != "overloaded" && reason != "server" && reason != "network" &&
			reason != "provider_limit" && reason != store.StopTenantSpendCap) {
			m.escalations.WithLabelValues(run.Agent, reason).Inc()
		}
	}
}
