package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)

	out, err := belayCmd(t, "runs", "--db", f.db)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("want a header and 2 runs, got:\n%s", out)
	}
	for _, want := range [][]string{
		{"ID", "AGENT", "STATUS", "STEPS", "MODEL CALLS", "COST USD", "STOP REASON", "CREATED"},
		{f.done, "support", "done", "no_requirements"},
		{f.failed, "broken", "failed", "model_error"},
	} {
		if !containsLine(lines, want...) {
			t.Errorf("no line has all of %q:\n%s", want, out)
		}
	}

	out, err = belayCmd(t, "runs", "--db", f.db, "--status", "failed")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, f.failed) || strings.Contains(out, f.done) {
		t.Errorf("--status failed should list only %s:\n%s", f.failed, out)
	}

	newest := max(f.done, f.failed)
	out, err = belayCmd(t, "runs", "--db", f.db, "--limit", "1")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(strings.TrimSpace(out), "\n"); got != 1 || !strings.Contains(out, newest) {
		t.Errorf("--limit 1 should list only the newest run %s:\n%s", newest, out)
	}
}

func TestRunsJSON(t *testing.T) {
	t.Parallel()
	f := newFixture(t)

	out, err := belayCmd(t, "runs", "--db", f.db, "--json")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]any{}
	for line := range strings.Lines(out) {
		var r map[string]any
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		got[r["run_id"].(string)] = r
	}
	if len(got) != 2 {
		t.Fatalf("want 2 runs, got %d:\n%s", len(got), out)
	}
	done := got[f.done]
	for k, want := range map[string]any{"agent": "support", "status": "done", "step": 2.0, "model_calls": 3.0, "user": "alice", "stop_reason": "no_requirements"} {
		if done[k] != want {
			t.Errorf("%s = %v, want %v", k, done[k], want)
		}
	}
	if cost, _ := done["cost_usd"].(float64); cost <= 0 {
		t.Errorf("cost_usd = %v, want > 0", done["cost_usd"])
	}
	if got[f.failed]["status"] != "failed" {
		t.Errorf("status of %s = %v, want failed", f.failed, got[f.failed]["status"])
	}
}

func TestRunsUsage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, args := range [][]string{
		{"runs", "--db", f.db, "--status", "finished"},
		{"runs", "--db", f.db, "--limit", "-1"},
		{"runs", "--db", f.db, "extra"},
	} {
		_, err := belayCmd(t, args...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: got %v, want a usage error", args, err)
		}
	}
}

// containsLine reports whether one of lines contains every one of parts.
func containsLine(lines []string, parts ...string) bool {
	for _, l := range lines {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(l, p)
		}
		if ok {
			return true
		}
	}
	return false
}
