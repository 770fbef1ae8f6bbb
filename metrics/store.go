package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/belayrun/belay/store"
)

// StoreCollector reads gauges from the store at each scrape: runs by status
// and approvals waiting for a person, across every worker sharing the
// store, not only this process. A store with a writer of its own (SQLite)
// also reports this process's commits, the writes they carried and the
// waits for another process writing the same file; one that can find
// itself unfit to write (store.HealthChecker) reports whether its file is
// damaged.
type StoreCollector struct {
	store   store.Store
	runs    *prometheus.Desc
	pending *prometheus.Desc
	up      *prometheus.Desc

	// writer is nil for a store that keeps no writer counters.
	writer                              interface{ WriterStats() store.WriterStats }
	commits, writes, written, lockWaits *prometheus.Desc

	// health is nil for a store that has no health of its own.
	health  store.HealthChecker
	corrupt *prometheus.Desc

	// deployer is nil for a store that does not count runs per version.
	deployer  store.Deployer
	byVersion *prometheus.Desc

	// breakers is nil for a store that keeps no breakers for the fleet.
	breakers     store.BreakerKeeper
	breakerState *prometheus.Desc
}

var _ prometheus.Collector = (*StoreCollector)(nil)

// NewStoreCollector returns a collector over s; register it with a
// registry.
func NewStoreCollector(s store.Store) *StoreCollector {
	c := &StoreCollector{
		store:   s,
		runs:    prometheus.NewDesc("belay_runs", "Runs in the store, by status.", []string{"status"}, nil),
		pending: prometheus.NewDesc("belay_approvals_pending", "Approvals waiting for a person.", nil, nil),
		up:      prometheus.NewDesc("belay_store_up", "1 if the store answered the last scrape.", nil, nil),
	}
	if w, ok := s.(store.WriterStatsReporter); ok {
		c.writer = w
		c.commits = prometheus.NewDesc("belay_store_commits_total",
			"Transactions this process's store writer committed; with group commit, one carries many writes.", nil, nil)
		c.writes = prometheus.NewDesc("belay_store_writes_total",
			"Writes this process's store writer committed (checkpoints, claims, approvals, ...).", nil, nil)
		c.written = prometheus.NewDesc("belay_store_written_bytes_total",
			"Payload bytes this process's store writer committed: messages, trace events, results.", nil, nil)
		c.lockWaits = prometheus.NewDesc("belay_store_lock_waits_total",
			"Transactions that found another process writing the same database file and waited for it.", nil, nil)
	}
	if h, ok := s.(store.HealthChecker); ok {
		c.health = h
		c.corrupt = prometheus.NewDesc("belay_store_corrupt",
			"1 once the store found its database file damaged and stopped writing to it (run belay check), else 0.", nil, nil)
	}
	if d, ok := s.(store.Deployer); ok {
		c.deployer = d
		c.byVersion = prometheus.NewDesc("belay_runs_by_version",
			"Runs not ended, by agent and agent version: runs a deploy left on an older version show here until they end or move.",
			[]string{"agent", "version"}, nil)
	}
	if k, ok := s.(store.BreakerKeeper); ok {
		c.breakers = k
		c.breakerState = prometheus.NewDesc("belay_breaker_state",
			"1 for the state (closed, open, half_open) a tool's circuit breaker is in for every worker of the store, 0 for the others; tools whose breaker never opened are not listed.",
			[]string{"tool", "state"}, nil)
	}
	return c
}

// Describe sends the gauges' descriptions.
func (c *StoreCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.runs
	ch <- c.pending
	ch <- c.up
	if c.writer != nil {
		ch <- c.commits
		ch <- c.writes
		ch <- c.written
		ch <- c.lockWaits
	}
	if c.health != nil {
		ch <- c.corrupt
	}
	if c.deployer != nil {
		ch <- c.byVersion
	}
	if c.breakers != nil {
		ch <- c.breakerState
	}
}

// Collect counts, with a bound so a slow store cannot hang the scrape.
func (c *StoreCollector) Collect(ch chan<- prometheus.Metric) {
	if c.writer != nil {
		// Counted in memory: reported even when the store does not answer.
		st := c.writer.WriterStats()
		ch <- prometheus.MustNewConstMetric(c.commits, prometheus.CounterValue, float64(st.Commits))
		ch <- prometheus.MustNewConstMetric(c.writes, prometheus.CounterValue, float64(st.Writes))
		ch <- prometheus.MustNewConstMetric(c.written, prometheus.CounterValue, float64(st.BytesWritten))
		ch <- prometheus.MustNewConstMetric(c.lockWaits, prometheus.CounterValue, float64(st.LockWaits))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if c.health != nil {
		corrupt := 0.0
		if errors.Is(c.health.Health(ctx), store.ErrCorrupt) {
			corrupt = 1
		}
		ch <- prometheus.MustNewConstMetric(c.corrupt, prometheus.GaugeValue, corrupt)
	}
	counts, err := c.store.Counts(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, s := range []store.Status{store.StatusQueued, store.StatusRunning, store.StatusWaitingApproval, store.StatusWaitingInput,
		store.StatusPaused, store.StatusDone, store.StatusFailed, store.StatusEscalated, store.StatusCanceled} {
		ch <- prometheus.MustNewConstMetric(c.runs, prometheus.GaugeValue, float64(counts.Runs[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(counts.PendingApprovals))
	if c.breakers != nil {
		if all, err := c.breakers.Breakers(ctx); err == nil {
			for _, b := range all {
				for _, s := range []store.BreakerState{store.BreakerClosed, store.BreakerOpen, store.BreakerHalfOpen} {
					v := 0.0
					if b.State == s {
						v = 1
					}
					ch <- prometheus.MustNewConstMetric(c.breakerState, prometheus.GaugeValue, v, b.Name, string(s))
				}
			}
		}
	}
	if c.deployer != nil {
		versions, err := c.deployer.RunsByVersion(ctx)
		if err != nil {
			return
		}
		for _, v := range versions {
			ch <- prometheus.MustNewConstMetric(c.byVersion, prometheus.GaugeValue, float64(v.Runs), v.Agent, v.Version)
		}
	}
}
