package policy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/belayrun/belay/policy"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

// A store whose runs recorded the calls a traffic file counts gives, with
// that file's harm, the table the file gives: policy simulate --from-store
// and --traffic agree for the same counts.
func TestTrafficFromStoreGivesTheTrafficFilesTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	traffic, err := policy.LoadTraffic("testdata/traffic.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Load("testdata/rule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	// The calls are spread over runs in the reverse order of the file, and
	// each run records one call twice (its step ran again after a crash).
	for i := len(traffic) - 1; i >= 0; i-- {
		a := traffic[i]
		var events []store.Event
		for n := range a.Count {
			args, _ := json.Marshal(map[string]any{"cents": a.Cents, "bulk": a.Bulk, "note": "x"})
			data, _ := json.Marshal(store.ToolCallData{ID: fmt.Sprintf("toolu_%d", n), Tool: a.Kind, Args: args, Effect: string(a.Effect)})
			events = append(events, store.Event{Type: store.EventToolCall, Time: now, Data: data})
			if n == 0 {
				events = append(events, store.Event{Type: store.EventToolCall, Time: now, Data: data})
			}
		}
		if _, _, err := st.CreateRun(ctx, store.CreateRunParams{ID: fmt.Sprintf("run-%d", i), Tenant: "acme", User: "u",
			Agent: "support", Now: now, Events: events}); err != nil {
			t.Fatal(err)
		}
	}
	fromStore, err := policy.TrafficFromStore(ctx, st, time.Time{}, traffic)
	if err != nil {
		t.Fatal(err)
	}
	want, err := policy.Simulate(ctx, traffic, p.Policy(), 0.03)
	if err != nil {
		t.Fatal(err)
	}
	got, err := policy.Simulate(ctx, fromStore, p.Policy(), 0.03)
	if err != nil {
		t.Fatal(err)
	}
	if got.Format() != want.Format() {
		t.Errorf("from the store:\n%s\nfrom the traffic file:\n%s", got.Format(), want.Format())
	}
	if later, err := policy.TrafficFromStore(ctx, st, now.Add(time.Hour), traffic); err != nil || len(later) != 0 {
		t.Errorf("traffic of runs created after the calls: %+v, %v", later, err)
	}
}
