package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/belayrun/belay/policy"
	"github.com/belayrun/belay/store"
)

// policy simulate --from-store prints, for a store whose runs recorded the
// calls of the traffic file, the table --traffic prints for the file.
func TestPolicySimulateFromStore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	trafficFile, ruleFile := "../../policy/testdata/traffic.yaml", "../../policy/testdata/rule.yaml"
	traffic, err := policy.LoadTraffic(trafficFile)
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "belay.db")
	st, err := openStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i, a := range traffic {
		var events []store.Event
		for n := range a.Count {
			args, _ := json.Marshal(map[string]any{"cents": a.Cents, "bulk": a.Bulk})
			data, _ := json.Marshal(store.ToolCallData{ID: fmt.Sprint("toolu_", n), Tool: a.Kind, Args: args})
			events = append(events, store.Event{Type: store.EventToolCall, Time: now, Data: data})
		}
		if _, _, err := st.CreateRun(ctx, store.CreateRunParams{ID: fmt.Sprint("run-", i), Tenant: "acme", User: "u",
			Agent: "support", Now: now, Events: events}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	simulate := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(ctx, append([]string{"policy", "simulate", "--policy", ruleFile}, args...), &out, &errb); err != nil {
			t.Fatalf("policy simulate %v: %v", args, err)
		}
		return out.String()
	}
	want := simulate("--traffic", trafficFile)
	if got := simulate("--from-store", "--since", "1h", "--harm", trafficFile, "--db", db); got != want {
		t.Errorf("--from-store printed\n%s\n--traffic printed\n%s", got, want)
	}
	var out, errb bytes.Buffer
	var ue usageError
	if err := run(ctx, []string{"policy", "simulate", "--policy", ruleFile, "--from-store", "--traffic", trafficFile, "--db", db}, &out, &errb); err == nil {
		t.Error("--from-store with --traffic: no error")
	} else if _, ok := err.(usageError); !ok {
		t.Errorf("--from-store with --traffic: %v, want a usage error %T", err, ue)
	}
}
