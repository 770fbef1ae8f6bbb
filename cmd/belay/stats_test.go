package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// belay stats approvals reports a policy's decisions apart from people's,
// in the table and in --json, and names the policy.
func TestStatsShowPolicyDecisionsApart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "belay.db")
	st, err := openStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	type wipeIn struct {
		Account string `json:"account"`
	}
	wipe := belay.NewTool("delete_account", "delete an account", belay.Irreversible, func(ctx context.Context, in wipeIn) (string, error) {
		return "deleted", nil
	})
	agent := &belay.Agent{Name: "a", Tools: []belay.Tool{wipe}, Model: scripted.Func(func(req model.Request) (scripted.Reply, error) {
		if len(req.Messages) == 1 {
			return scripted.Reply{Calls: []scripted.Call{{Name: "delete_account", Args: wipeIn{Account: req.Messages[0].Content[0].Text}}}}, nil
		}
		return scripted.Reply{Text: "done"}, nil
	})}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{agent}, HumanApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, account := range []string{"ACC-1", "ACC-2"} {
		if _, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "a", Tenant: "acme", User: account, Input: account}); err != nil {
			t.Fatal(err)
		}
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	pending, err := st.Approvals(ctx, store.ListApprovalsParams{Status: store.ApprovalPending})
	if err != nil || len(pending) != 2 {
		t.Fatalf("pending %v, %v", pending, err)
	}
	if _, err := belay.NewOperator(st).Decide(ctx, "", pending[0].ID, belay.ApprovalDecision{Verdict: "approve", By: "policy:demo-auto"}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	belayRun := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(ctx, append(args, "--db", db), &out, &errb); err != nil {
			t.Fatalf("belay %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String()
	}
	belayRun("reject", pending[1].ID, "--note", "open invoices", "--as", "human:maya")

	table := belayRun("stats", "approvals")
	if !strings.Contains(table, "policy:demo-auto 1") || !strings.Contains(table, "people's decisions") {
		t.Errorf("the table does not show the policy's decision apart:\n%s", table)
	}
	type category struct {
		People map[string]any `json:"people"`
		Policy map[string]any `json:"policy"`
	}
	var stats []category
	for line := range strings.Lines(belayRun("stats", "approvals", "--json")) {
		var c category
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("stats --json: line %q: %v", line, err)
		}
		stats = append(stats, c)
	}
	if len(stats) != 1 {
		t.Fatalf("stats --json: %d categories, want 1: %+v", len(stats), stats)
	}
	if people := stats[0].People; people["decided"] != 1.0 || people["rejection_rate"] != 1.0 {
		t.Errorf("people's decisions %v, want maya's rejection alone", people)
	}
	if policy := stats[0].Policy; policy["decided"] != 1.0 || policy["approved"] != 1.0 {
		t.Errorf("policies' decisions %v, want the auto-approval", policy)
	}
}
