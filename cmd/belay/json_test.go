package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// dataStore is a store with something in it for every command to print:
// finished runs with side effects, a run waiting for two approvals of
// tenant acme, one paused on its budget, one on an unknown outcome, one on
// a version mismatch, and approvals decided by a person and by a policy.
type dataStore struct {
	db                       string
	done                     string
	budget, unknown, version string
	// unknownKey is the side effect whose outcome is unknown.
	unknownKey string
	// toVersion is the version the mismatched run's workers run.
	toVersion string
	// pending are two approvals to decide.
	pending []string
	// asking waits for its user's reply.
	asking string
	// question waits for a person's answer to its call questionCall.
	question, questionCall string
}

func newDataStore(t *testing.T) dataStore {
	t.Helper()
	ctx := t.Context()
	f := newFixture(t)
	d := dataStore{db: f.db, done: f.done}
	st, err := openStore(ctx, d.db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	noop := func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }
	allow := func(context.Context, belay.PolicyCall) (belay.Decision, error) {
		return belay.Decision{Verdict: belay.Allow}, nil
	}
	type wipeIn struct {
		Account string `json:"account"`
	}
	wipe := belay.NewTool("delete_account", "delete an account", belay.Irreversible, func(ctx context.Context, in wipeIn) (string, error) {
		return "deleted", nil
	})
	agents := []*belay.Agent{
		{Name: "wipe", Tools: []belay.Tool{wipe}, Model: scripted.Func(func(req model.Request) (scripted.Reply, error) {
			if len(req.Messages) == 1 {
				return scripted.Reply{Calls: []scripted.Call{{Name: "delete_account", Args: wipeIn{Account: req.Messages[0].Content[0].Text}}}}, nil
			}
			return scripted.Reply{Text: "done"}, nil
		})},
		{Name: "budget", Budget: belay.Budget{MaxTurns: 1}, Tools: []belay.Tool{{Name: "noop", Call: noop}},
			Model: scripted.New(scripted.Reply{Calls: []scripted.Call{{Name: "noop"}}}, scripted.Reply{Text: "done"})},
		{Name: "lost", Policy: allow, PolicyVersion: "allow",
			Tools: []belay.Tool{{Name: "send", Effect: belay.Write, Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
				return nil, belay.ErrUnknownOutcome
			}}},
			Model: scripted.New(scripted.Reply{Calls: []scripted.Call{{Name: "send", Args: map[string]string{"to": "ada"}}}}, scripted.Reply{Text: "sent"})},
		{Name: "versioned", Version: "v1", Model: scripted.New()},
		askingAgent(),
	}
	rt, err := belay.New(belay.Config{Store: st, Agents: agents, HumanApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	start := func(agent, user, input string) string {
		t.Helper()
		run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: agent, Tenant: "acme", User: user, Input: input})
		if err != nil {
			t.Fatal(err)
		}
		return run.ID
	}
	for _, account := range []string{"ACC-1", "ACC-2", "ACC-3", "ACC-4"} {
		start("wipe", account, account)
	}
	d.budget = start("budget", "u", "hi")
	d.unknown = start("lost", "u", "send it")
	d.version = start("versioned", "u", "hi")
	d.asking = start("asking", "ada", "refund my order")
	// The versioned run is claimed by a worker of v2 alone.
	if err := drainExcept(ctx, st, append(agents[:3:3], agents[4])); err != nil {
		t.Fatal(err)
	}
	v2 := &belay.Agent{Name: "versioned", Version: "v2", Model: scripted.New(scripted.Reply{Text: "done on v2"})}
	if err := drainExcept(ctx, st, []*belay.Agent{v2}); err != nil {
		t.Fatal(err)
	}
	d.toVersion = "v2"
	pending, err := st.Approvals(ctx, store.ListApprovalsParams{Status: store.ApprovalPending})
	if err != nil || len(pending) != 4 {
		t.Fatalf("pending %v, %v", pending, err)
	}
	if _, err := belay.NewOperator(st).Decide(ctx, "", pending[0].ID, belay.ApprovalDecision{Verdict: "approve", By: "policy:demo-auto"}); err != nil {
		t.Fatal(err)
	}
	if _, err := belay.NewOperator(st).Decide(ctx, "", pending[1].ID, belay.ApprovalDecision{Verdict: "reject", By: "human:maya", Note: "open invoices"}); err != nil {
		t.Fatal(err)
	}
	d.pending = []string{pending[2].ID, pending[3].ID}
	// The decided runs go on: one deletes an account on a policy's
	// approval, which belay audit lists.
	if err := drainExcept(ctx, st, agents[:1]); err != nil {
		t.Fatal(err)
	}
	effects, err := st.Effects(ctx, "", d.unknown)
	if err != nil || len(effects) != 1 {
		t.Fatalf("effects of %s: %v, %v", d.unknown, effects, err)
	}
	d.unknownKey = effects[0].Key
	desk := waitingAgents()[1:2]
	if d.question, d.questionCall, err = askedRun(ctx, st, desk); err != nil {
		t.Fatal(err)
	}
	for id, reason := range map[string]string{d.budget: "max_turns", d.unknown: "unknown_outcome", d.version: "version_mismatch"} {
		if r, _ := st.GetRun(ctx, "", id); r.Status != store.StatusPaused || r.StopReason != reason {
			t.Fatalf("run %s is %s (%s), want paused on %s", id, r.Status, r.StopReason, reason)
		}
	}
	return d
}

// askedRun starts a run of the one agent of agents, which asks a person,
// and returns it with the call that waits.
func askedRun(ctx context.Context, st store.Store, agents []*belay.Agent) (runID, call string, err error) {
	rt, err := belay.New(belay.Config{Store: st, Agents: agents})
	if err != nil {
		return "", "", err
	}
	run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: agents[0].Name, Tenant: "acme", User: "ada", Input: "go"})
	if err != nil {
		return "", "", err
	}
	if err := rt.Drain(ctx); err != nil {
		return "", "", err
	}
	ws, err := st.(store.Waiter).Waits(ctx, store.ListWaitsParams{RunID: run.ID})
	if err != nil || len(ws) != 1 {
		return "", "", fmt.Errorf("waits of run %s: %+v, %v", run.ID, ws, err)
	}
	return run.ID, ws[0].ToolUseID, nil
}

// drainExcept runs the due runs of these agents alone.
func drainExcept(ctx context.Context, st store.Store, agents []*belay.Agent) error {
	rt, err := belay.New(belay.Config{Store: st, Agents: agents, HumanApproval: true})
	if err != nil {
		return err
	}
	return rt.Drain(ctx)
}

// jsonKey is what every field name of every --json output looks like.
var jsonKey = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// dataKeys hold objects whose keys are data, not field names: a tool's own
// arguments and results (as its author named them), and counts per decider
// ("policy:demo-auto").
var dataKeys = []string{"args", "edited_args", "input", "result", "by"}

// badKeys returns the paths of the object keys in v that are not snake_case.
func badKeys(v any, path string) []string {
	var bad []string
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			p := path + "." + k
			if !jsonKey.MatchString(k) {
				bad = append(bad, p)
			}
			if !slices.Contains(dataKeys, k) {
				bad = append(bad, badKeys(x, p)...)
			}
		}
	case []any:
		for _, x := range v {
			bad = append(bad, badKeys(x, path+"[]")...)
		}
	}
	return bad
}

// Every command that prints data prints it with --json as JSON Lines: each
// line one JSON object, every field name snake_case, lists a line per item.
// The commands are run in order on one store (some change it: start,
// approve, resume...), and every command of the table but serve is among
// them.
func TestEveryCommandPrintsJSONLines(t *testing.T) {
	d := newDataStore(t)
	dir := t.TempDir()
	t.Setenv("BELAY_DB", d.db)
	t.Setenv("BELAY_DATABASE_URL", "")
	var keyID string
	cases := []struct {
		args []string
		// then reads what the command printed, for the commands after it.
		then func(lines []map[string]any)
	}{
		{args: []string{"version"}},
		{args: []string{"runs", "--limit", "0"}},
		{args: []string{"show", d.done}},
		{args: []string{"show", d.unknown}},
		{args: []string{"trace", d.done}},
		{args: []string{"approvals", "--status", "all"}},
		{args: []string{"stats", "approvals"}},
		{args: []string{"replay", "--runs", d.done}},
		{args: []string{"audit"}, then: func(lines []map[string]any) {
			if len(lines) != 1 || lines[0]["tool"] != "delete_account" || lines[0]["decided_by"] != "policy:demo-auto" {
				t.Errorf("audit --json: %v, want the account deleted on policy:demo-auto's approval", lines)
			}
		}},
		{args: []string{"keys", "create", "--tenant", "acme", "--role", "approver", "--name", "maya"},
			then: func(lines []map[string]any) { keyID, _ = lines[0]["id"].(string) }},
		{args: []string{"keys", "list"}},
		{args: []string{"webhooks", "add", "https://example.com/hook", "--tenant", "acme"}},
		{args: []string{"webhooks", "list", "--tenant", "acme"}},
		{args: []string{"schedules", "add", "nightly", "--agent", "support", "--cron", "0 2 * * *", "--input", "Check yesterday's refunds."},
			then: func(lines []map[string]any) {
				if len(lines) != 1 || lines[0]["name"] != "nightly" || lines[0]["overlap"] != "skip" || lines[0]["missed"] != "run_once" {
					t.Errorf("schedules add --json: %v, want nightly with its default policies", lines)
				}
			}},
		{args: []string{"schedules", "list"}},
		{args: []string{"schedules", "remove", "nightly"}},
		{args: []string{"killswitch", "on", "--tenant", "acme", "--reason", "provider incident"}},
		{args: []string{"killswitch", "status"}},
		{args: []string{"killswitch", "off", "--tenant", "acme"}},
		{args: []string{"tenant-limit", "--tenant", "acme", "--max-running", "5"}},
		{args: []string{"agent-limit", "--agent", "support", "--max-running", "8", "--starts-per-minute", "120"}},
		{args: []string{"spend-cap", "--tenant", "acme", "--max-usd-per-day", "50"}},
		{args: []string{"start", "--tenant", "acme", "--user", "ada", "--request-id", "T-9", "--input", "I was charged twice"}},
		{args: []string{"approve", d.pending[0], "--as", "human:maya"}},
		{args: []string{"reject", d.pending[1], "--note", "disputed", "--as", "human:maya"}},
		{args: []string{"resume", d.budget, "--add-turns", "1"}},
		{args: []string{"say", d.asking, "to my card", "--key", "msg-1"}},
		{args: []string{"signal", d.asking, "payment_settled", "--key", "ev-1"}},
		{args: []string{"answer", d.question, d.questionCall, "yes", "--as", "human:maya"}},
		{args: []string{"resolve", d.unknown, d.unknownKey, "--not-applied"}},
		{args: []string{"migrate", d.version, "--to-version", d.toVersion}},
		{args: []string{"fork", d.done, "--at-step", "2", "--as", "human:fran"}},
		{args: []string{"prune", "--older-than", "1h"}},
		{args: []string{"backup", filepath.Join(dir, "copy.db")}},
		{args: []string{"check"}},
		{args: []string{"bench", "--runs", "2", "--steps", "1", "--concurrency", "1"}},
		{args: []string{"policy", "check", "--policy", "../../policy/testdata/rule.yaml"}},
		{args: []string{"policy", "simulate", "--traffic", "../../policy/testdata/traffic.yaml", "--policy", "../../policy/testdata/rule.yaml"}},
		{args: []string{"demo", "--scenario", "stuck", "--db", filepath.Join(dir, "demo.db")}},
	}
	tested := map[string]bool{}
	for _, c := range cases {
		name := strings.Join(c.args, " ")
		tested[c.args[0]] = true
		var out, errb bytes.Buffer
		if err := run(t.Context(), append(slices.Clone(c.args), "--json"), &out, &errb); err != nil {
			t.Errorf("belay %s --json: %v\n%s", name, err, errb.String())
			continue
		}
		var lines []map[string]any
		for line := range strings.Lines(out.String()) {
			var v any
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Errorf("belay %s --json: line %q is not JSON: %v", name, line, err)
				continue
			}
			obj, ok := v.(map[string]any)
			if !ok {
				t.Errorf("belay %s --json: line %.80q is not one JSON object", name, line)
				continue
			}
			for _, k := range badKeys(obj, "") {
				t.Errorf("belay %s --json: key %s is not snake_case", name, k)
			}
			lines = append(lines, obj)
		}
		if len(lines) == 0 {
			t.Errorf("belay %s --json printed nothing:\n%s", name, out.String())
			continue
		}
		if c.then != nil {
			c.then(lines)
		}
	}
	if keyID != "" {
		var out, errb bytes.Buffer
		if err := run(t.Context(), []string{"keys", "revoke", keyID, "--tenant", "acme", "--json"}, &out, &errb); err != nil || json.Valid(out.Bytes()) == false {
			t.Errorf("keys revoke --json: %v, %q", err, out.String())
		}
	}
	for _, c := range commands() {
		if !c.hidden && c.name != "serve" && !tested[c.name] {
			t.Errorf("belay %s is not among the commands whose --json is checked", c.name)
		}
	}
}
