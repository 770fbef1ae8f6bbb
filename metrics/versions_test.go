package metrics_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/belayrun/belay/metrics"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

// belay_runs_by_version counts the runs not ended of each agent version, so
// that runs a deploy left behind are seen; an ended run is not counted.
func TestRunsByVersionGauge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for i, v := range []string{"v1", "v1", "v2", "v0"} {
		if _, _, err := st.CreateRun(ctx, store.CreateRunParams{ID: "run-" + string(rune('a'+i)), Tenant: "acme", User: "u",
			Agent: "support", AgentVersion: v, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	claimed, err := st.ClaimRuns(ctx, store.ClaimRunsParams{Owner: "w", Now: now, TTL: time.Hour, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range claimed {
		if r.AgentVersion == "v0" {
			err := st.Checkpoint(ctx, store.CheckpointParams{Fence: store.Fence{RunID: r.ID, Owner: r.LeaseOwner, Epoch: r.LeaseEpoch},
				Now: now, Run: store.RunUpdate{Status: store.StatusDone}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewStoreCollector(st))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "belay_runs_by_version" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got[labels["agent"]+"@"+labels["version"]] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{"support@v1": 2, "support@v2": 1}
	if len(got) != len(want) || got["support@v1"] != 2 || got["support@v2"] != 1 {
		t.Errorf("belay_runs_by_version = %v, want %v", got, want)
	}
}
