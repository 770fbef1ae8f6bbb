package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
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

func TestTraceLine(t *testing.T) {
	t.Parallel()
	ts := time.Unix(1700000000, 123456000)
	for _, c := range []struct {
		data json.RawMessage
		want string
	}{
		{json.RawMessage(`{"b": 1, "a": {"x": [1, 2]}}`), `{"ts":1700000000.123456,"run_id":"run_1","step":3,"type":"t","b":1,"a":{"x":[1,2]}}`},
		{json.RawMessage(`{"step": 9, "type": "x"}`), `{"ts":1700000000.123456,"run_id":"run_1","step":3,"type":"t","data_step":9,"data_type":"x"}`},
		{nil, `{"ts":1700000000.123456,"run_id":"run_1","step":3,"type":"t"}`},
		{json.RawMessage(`[1]`), `{"ts":1700000000.123456,"run_id":"run_1","step":3,"type":"t","data":[1]}`},
	} {
		got, err := traceLine(store.Event{RunID: "run_1", Step: 3, Type: "t", Time: ts, Data: c.data})
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != c.want {
			t.Errorf("data %s:\n got %s\nwant %s", c.data, got, c.want)
		}
	}
}
