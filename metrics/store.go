package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/belayrun/belay/store"
)

// StoreCollector reads gauges from the store at each scrape: runs by status
// and approvals waiting for a person, across every worker sharing the
// store, not only this process.
type StoreCollector struct {
	store   store.Store
	runs    *prometheus.Desc
	pending *prometheus.Desc
	up      *prometheus.Desc
}

var _ prometheus.Collector = (*StoreCollector)(nil)

// NewStoreCollector returns a collector over s; register it with a
// registry.
func NewStoreCollector(s store.Store) *StoreCollector {
	return &StoreCollector{
		store:   s,
		runs:    prometheus.NewDesc("belay_runs", "Runs in the store, by status.", []string{"status"}, nil),
		pending: prometheus.NewDesc("belay_approvals_pending", "Approvals waiting for a person.", nil, nil),
		up:      prometheus.NewDesc("belay_store_up", "1 if the store answered the last scrape.", nil, nil),
	}
}

// Describe sends the gauges' descriptions.
func (c *StoreCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.runs
	ch <- c.pending
	ch <- c.up
}

// Collect counts, with a bound so a slow store cannot hang the scrape.
func (c *StoreCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := c.store.Counts(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, s := range []store.Status{store.StatusQueued, store.StatusRunning, store.StatusWaitingApproval, store.StatusPaused,
		store.StatusDone, store.StatusFailed, store.StatusEscalated, store.StatusCanceled} {
		ch <- prometheus.MustNewConstMetric(c.runs, prometheus.GaugeValue, float64(counts.Runs[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(counts.PendingApprovals))
}
