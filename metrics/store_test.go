package metrics_test

import (
	"context"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/belayrun/belay/metrics"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
	"github.com/belayrun/belay/store/sqlite/sqlitetest"
)

// belay_store_corrupt is 0 while the store writes, and 1 once it found its
// file damaged and stopped.
func TestStoreCorruptGauge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "belay.db")
	st, err := sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sqlitetest.CreateRuns(t, st, 300)
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewStoreCollector(st))
	if v := gauge(t, reg, "belay_store_corrupt"); v != 0 {
		t.Errorf("belay_store_corrupt of an intact store = %v, want 0", v)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	sqlitetest.DamageInterior(t, path, "runs")
	st, err = sqlite.Open(ctx, path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg = prometheus.NewRegistry()
	reg.MustRegister(metrics.NewStoreCollector(st))
	if v := gauge(t, reg, "belay_store_corrupt"); v != 0 {
		t.Errorf("belay_store_corrupt before anything reached the damaged pages = %v, want 0", v)
	}
	if _, err := st.ListRuns(ctx, store.ListRunsParams{Limit: 1000}); err == nil {
		t.Fatal("ListRuns over damaged pages: no error")
	}
	if v := gauge(t, reg, "belay_store_corrupt"); v != 1 {
		t.Errorf("belay_store_corrupt after the damage was found = %v, want 1", v)
	}
}

// gauge scrapes reg and returns the value of the unlabelled series name.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no series %s in the scrape", name)
	return 0
}

// belay_breaker_state says which state each tool's breaker is in for the
// whole fleet, as the store keeps it: open once failures recorded by any
// worker opened it.
func TestBreakerStateGauge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewStoreCollector(st))
	now := time.Now()
	for _, tool := range []string{"courier", "courier", "bank"} {
		if _, err := st.BreakerFailure(ctx, store.BreakerFailureParams{Name: tool, Now: now, Failures: 2,
			Window: time.Minute, OpenFor: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "belay_breaker_state" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got[labels["tool"]+"/"+labels["state"]] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{"courier/open": 1, "courier/closed": 0, "courier/half_open": 0,
		"bank/closed": 1, "bank/open": 0, "bank/half_open": 0}
	if !maps.Equal(got, want) {
		t.Errorf("belay_breaker_state %v, want %v", got, want)
	}
}
