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

	"github.com/belayrun/belay/examples/support"
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
// resume, done) and says so with its exit status. Run again on the same
// database, it plays again on the next ticket with its world restarted:
// one refund again, and both runs in the store.
func TestCrashDemoHoldsAndRunsAgainOnItsDatabase(t *testing.T) {
	bin := belayBinary(t)
	db := filepath.Join(t.TempDir(), "belay.db")
	type summary struct {
		RunID       string         `json:"run_id"`
		Ticket      string         `json:"ticket"`
		Status      string         `json:"status"`
		Crashes     int            `json:"crashes"`
		Resumes     int            `json:"resumes"`
		SideEffects map[string]int `json:"side_effects"`
	}
	var runs []summary
	for _, ticket := range []string{"T-1001", "T-1002"} {
		demo := exec.Command(bin, "demo", "--json", "--yes", "--db", db)
		demo.Env = append(os.Environ(), "BELAY_DATABASE_URL=")
		out, err := demo.Output()
		if err != nil {
			t.Fatalf("demo on %s: %v\n%s", ticket, err, out)
		}
		var got summary
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("summary %q: %v", out, err)
		}
		if got.Ticket != ticket || got.Status != "done" || got.Crashes != 1 || got.Resumes != 1 || got.SideEffects["refunds"] != 1 {
			t.Errorf("summary %+v, want ticket %s done after one crash and one resume, one refund", got, ticket)
		}
		runs = append(runs, got)
	}
	var out, errb bytes.Buffer
	if err := run(context.Background(), []string{"runs", "--json", "--db", db}, &out, &errb); err != nil {
		t.Fatalf("runs: %v\n%s", err, errb.String())
	}
	for _, r := range runs {
		if !strings.Contains(out.String(), r.RunID) {
			t.Errorf("belay runs lacks the run %s of ticket %s:\n%s", r.RunID, r.Ticket, out.String())
		}
	}
}

// The demo tells its story in words a newcomer reads: steps counted from
// 1 as belay runs counts them, no lease epochs, no status said twice, no
// JSON for why a run went to a person. The scenario's facts are in it.
func TestDemoTellsItsStoryInWords(t *testing.T) {
	t.Parallel()
	cases := map[string][]string{
		"unverified": {
			"ticket T-1001", "  step 1  a worker picks up the run",
			"step 5  the model asks for issue_refund",
			"the policy holds issue_refund for a person: refunds above 50 USD",
			"issue_refund approved by policy:demo-auto",
			"NOT so in the world: reason in CRM",
			"why        the world does not show: reason in CRM",
			"    step 6   reply",
			"status        escalated: the model said it was done, and the world says otherwise",
			"6 steps, 7 model calls",
		},
		"budget": {
			"  step 3  the model asks for get_account",
			"the run pauses: it has spent $0.000482, the next model call would cost $0.000781, and its budget is $0.001200",
			"  step 4  resumed by human:demo-operator, who adds $0.002 to its budget",
			"  answer  the model writes its answer",
			"the run is done: every requirement holds in the world",
			"status        done: verified in the world",
		},
		"stuck": {
			"the loop detector (progress) fires: the model is told to change course (REPLAN)",
			"the loop detector (progress) fires again: the run goes to a person",
			"the run is handed to a person: it was going round in circles",
			"done       nothing yet changed in the world",
		},
	}
	for name, want := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var out, errb bytes.Buffer
			db := filepath.Join(t.TempDir(), "belay.db")
			if err := run(context.Background(), []string{"demo", "--scenario", name, "--db", db}, &out, &errb); err != nil {
				t.Fatalf("demo --scenario %s: %v\n%s", name, err, errb.String())
			}
			text := out.String()
			for _, w := range want {
				if !strings.Contains(text, w) {
					t.Errorf("the %s demo does not say %q:\n%s", name, w, text)
				}
			}
			for _, jargon := range []string{"epoch", "step 0", "waiting_approval (waiting_approval)", `{"complete"`, "lease released"} {
				if strings.Contains(text, jargon) {
					t.Errorf("the %s demo says %q:\n%s", name, jargon, text)
				}
			}
		})
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

// The conversation demo, run as a user runs it: the worker that asked the
// customer is killed with SIGKILL while the run waits, the customer answers
// a day later by the demo's clock, another process goes on. The support
// world's own records show one refund, asked of billing once; with refunds
// denied the scenario does not hold, and --json says so with its exit
// status.
func TestConversationDemoHolds(t *testing.T) {
	bin := belayBinary(t)
	db := filepath.Join(t.TempDir(), "belay.db")
	demo := exec.Command(bin, "demo", "--scenario", "conversation", "--json", "--yes", "--db", db)
	demo.Env = append(os.Environ(), "BELAY_DATABASE_URL=")
	out, err := demo.Output()
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	var got struct {
		Status     string `json:"status"`
		StopReason string `json:"stop_reason"`
		Crashes    int    `json:"crashes"`
		Resumes    int    `json:"resumes"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	if got.Status != "done" || got.StopReason != "verified" || got.Crashes != 1 || got.Resumes != 1 {
		t.Errorf("summary %+v, want done and verified after one crash and one resume", got)
	}
	world, err := support.OpenWorld(t.Context(), db+".world")
	if err != nil {
		t.Fatal(err)
	}
	defer world.Close()
	counts, err := world.Counts(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	requests, err := world.RefundRequests(t.Context(), "CH-2")
	if err != nil {
		t.Fatal(err)
	}
	if counts.Refunds != 1 || requests != 1 || counts.Emails != 1 || counts.Notes != 1 {
		t.Errorf("the world holds %d refunds (%d asked of billing), %d emails, %d notes; want one of each", counts.Refunds, requests, counts.Emails, counts.Notes)
	}

	policy := filepath.Join(t.TempDir(), "deny.yaml")
	if err := os.WriteFile(policy, []byte("name: deny\nversion: 1\ndefault: by_effect\nrules:\n  - {name: no refunds, tool: issue_refund, decision: deny}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	denied := exec.Command(bin, "demo", "--scenario", "conversation", "--json", "--yes", "--policy", policy, "--db", filepath.Join(t.TempDir(), "belay.db"))
	denied.Env = append(os.Environ(), "BELAY_DATABASE_URL=")
	out, err = denied.Output()
	if err == nil || !json.Valid(out) {
		t.Errorf("conversation demo with refunds denied: err %v, summary %q; want the summary and a failed exit", err, out)
	}
}
