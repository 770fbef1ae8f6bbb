package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Each guard scenario of the demo ends as its guard says it must, and says
// so in its JSON summary. (The crash scenario starts worker processes of the
// belay binary; it is exercised by the engine's crash test and by running
// the demo, not here.)
func TestDemoGuardScenarios(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		status, reason string
		refunds, notes int
		missing        string
	}{
		"stuck":      {"escalated", "stuck_loop", 0, 0, ""},
		"budget":     {"done", "verified", 1, 1, ""},
		"unverified": {"escalated", "unverified", 1, 0, "reason in CRM"},
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var out, errb bytes.Buffer
			db := filepath.Join(t.TempDir(), "belay.db")
			err := run(context.Background(), []string{"demo", "--scenario", name, "--json", "--db", db}, &out, &errb)
			if err != nil {
				t.Fatalf("demo --scenario %s: %v\n%s", name, err, errb.String())
			}
			var got struct {
				Status      string         `json:"status"`
				StopReason  string         `json:"stop_reason"`
				SideEffects map[string]int `json:"side_effects"`
				Resumes     int            `json:"resumes"`
				Escalation  struct {
					Reason  string   `json:"reason"`
					Missing []string `json:"missing"`
				} `json:"escalation"`
			}
			if err := json.Unmarshal(out.Bytes(), &got); err != nil {
				t.Fatalf("summary %q: %v", out.String(), err)
			}
			if got.Status != want.status || got.StopReason != want.reason ||
				got.SideEffects["refunds"] != want.refunds || got.SideEffects["notes"] != want.notes {
				t.Errorf("summary %+v, want %+v", got, want)
			}
			if want.missing != "" && (len(got.Escalation.Missing) != 1 || got.Escalation.Missing[0] != want.missing) {
				t.Errorf("escalation %+v, want missing %q", got.Escalation, want.missing)
			}
			if name == "budget" && (got.Resumes != 1 || got.Escalation.Reason != "budget_usd") {
				t.Errorf("budget scenario: %d resumes, escalation %+v", got.Resumes, got.Escalation)
			}
		})
	}
}

// The crash demo, run as a user runs it: the belay binary, whose worker
// processes it starts and kills. It holds (one refund, one crash, one
// resume, done) and says so with its exit status; run again on the same
// database it refuses, rather than show a crash that did not happen.
func TestCrashDemoHoldsAndIsNotRepeatedOnItsDatabase(t *testing.T) {
	bin := belayBinary(t)
	db := filepath.Join(t.TempDir(), "belay.db")
	demo := exec.Command(bin, "demo", "--json", "--yes", "--db", db)
	demo.Env = append(os.Environ(), "BELAY_DATABASE_URL=")
	out, err := demo.Output()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	var got struct {
		Status      string         `json:"status"`
		Crashes     int            `json:"crashes"`
		Resumes     int            `json:"resumes"`
		SideEffects map[string]int `json:"side_effects"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	if got.Status != "done" || got.Crashes != 1 || got.Resumes != 1 || got.SideEffects["refunds"] != 1 {
		t.Errorf("summary %+v, want done after one crash and one resume, one refund", got)
	}
	again := exec.Command(bin, "demo", "--json", "--yes", "--db", db)
	again.Env = demo.Env
	out, err = again.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "already holds the demo's run") {
		t.Errorf("demo again on its database: %v\n%s\nwant a refusal naming the run", err, out)
	}
}

// A scenario that does not end as it must fails the command with --json
// too: the summary is printed, and the exit status says it did not hold.
func TestDemoJSONFailsWhenTheScenarioDoesNotHold(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	policy := filepath.Join(dir, "deny.yaml")
	if err := os.WriteFile(policy, []byte("name: deny\nversion: 1\ndefault: by_effect\nrules:\n  - {name: no refunds, tool: issue_refund, decision: deny}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"demo", "--scenario", "budget", "--policy", policy, "--json", "--db", filepath.Join(dir, "belay.db")}, &out, &errb)
	if err == nil || !json.Valid(out.Bytes()) {
		t.Errorf("budget scenario with refunds denied: err %v, summary %q; want the summary and an error", err, out.String())
	}
}
