package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestTrace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)

	out, err := belayCmd(t, "trace", f.done, "--db", f.db)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	step := 0
	for line := range strings.Lines(out) {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		ts, ok := e["ts"].(float64)
		if !ok || ts < float64(time.Now().Add(-time.Hour).Unix()) {
			t.Errorf("line %q: ts should be recent unix seconds", line)
		}
		if e["run_id"] != f.done {
			t.Errorf("line %q: run_id should be %s", line, f.done)
		}
		s, ok := e["step"].(float64)
		if !ok || int(s) < step {
			t.Errorf("line %q: step should be a number that never decreases", line)
		}
		step = int(s)
		typ, _ := e["type"].(string)
		if typ == "" {
			t.Errorf("line %q: no type", line)
		}
		if typ == "tool_call" && e["tool"] == nil {
			t.Errorf("line %q: the event's fields should be at the top level", line)
		}
		types = append(types, typ)
	}
	if len(types) == 0 || types[0] != "run_created" || types[len(types)-1] != "stop" {
		t.Errorf("events %v: want run_created first and stop last", types)
	}
	for _, want := range []string{"claimed", "model_call", "tool_call", "tool_result", "checkpoint"} {
		if !strings.Contains(strings.Join(types, " "), want) {
			t.Errorf("events %v: no %s", types, want)
		}
	}
	if step != 2 {
		t.Errorf("last step %d, want 2", step)
	}
}
