package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
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
