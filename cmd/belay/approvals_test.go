package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// pendingApproval prepares a store with one run waiting for the approval of
// an irreversible call, and returns the store's path and the approval.
func pendingApproval(t *testing.T) (string, store.Approval) {
	t.Helper()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "belay.db")
	st, err := openStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	type wipeIn struct {
		Account string `json:"account"`
	}
	wipe := belay.NewTool("delete_account", "delete an account", belay.Irreversible, func(ctx context.Context, in wipeIn) (string, error) {
		return "deleted", nil
	})
	agent := &belay.Agent{Name: "a", Tools: []belay.Tool{wipe}, Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: "delete_account", Args: wipeIn{Account: "ACC-9"}}}},
		scripted.Reply{Text: "done"})}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{agent}, HumanApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "a", Tenant: "acme", User: "u", Input: "close my account"}); err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	pending, err := st.Approvals(ctx, store.ListApprovalsParams{Status: store.ApprovalPending})
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending %v, %v", pending, err)
	}
	return db, pending[0]
}

func TestApprovalCommands(t *testing.T) {
	t.Parallel()
	db, a := pendingApproval(t)
	belayRun := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(context.Background(), append(args, "--db", db), &out, &errb)
		return out.String() + errb.String(), err
	}
	out, err := belayRun("approvals")
	if err != nil || !strings.Contains(out, a.ID) || !strings.Contains(out, "delete_account cannot be undone") || !strings.Contains(out, "ACC-9") {
		t.Fatalf("approvals: %v\n%s", err, out)
	}
	// approve and reject take an approval's id, and say so.
	for _, verb := range []string{"approve", "reject"} {
		_, err := belayRun(verb)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "which approval?") || !strings.Contains(err.Error(), "belay approvals") || strings.Contains(err.Error(), "run") {
			t.Errorf("%s with no id: %v, want a usage error asking which approval, naming belay approvals", verb, err)
		}
	}
	if _, err := belayRun("reject", a.ID); err == nil {
		t.Error("reject without a note was accepted")
	}
	if _, err := belayRun("approve", a.ID, "--edit", "{not json"); err == nil {
		t.Error("an edit that is not JSON was accepted")
	}
	// The mark of a hidden value, copied from the console or a trace, is
	// not a value to send to the tool.
	if _, err := belayRun("approve", a.ID, "--edit", `{"account_id":"[redacted]"}`); err == nil || !strings.Contains(err.Error(), "mark of a hidden value") {
		t.Errorf("an edit holding [redacted]: %v, want it refused", err)
	}
	if _, err := belayRun("approve", "ap_nope"); err == nil || !strings.Contains(err.Error(), "belay approvals") {
		t.Errorf("approving an unknown id: %v", err)
	}
	out, err = belayRun("reject", a.ID, "--note", "the customer has open invoices", "--as", "human:maya")
	if err != nil || !strings.Contains(out, "rejected by human:maya") {
		t.Fatalf("reject: %v\n%s", err, out)
	}
	if _, err := belayRun("approve", a.ID); err == nil || !strings.Contains(err.Error(), "already decided") {
		t.Errorf("a second decision: %v", err)
	}
	out, _ = belayRun("approvals", "--status", "rejected", "--json")
	var got approvalJSON
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &got); err != nil || got.ID != a.ID || got.DecidedBy != "human:maya" || got.Note != "the customer has open invoices" {
		t.Errorf("rejected approval %q (%v)", out, err)
	}
	out, err = belayRun("stats", "approvals")
	if err != nil || !strings.Contains(out, "delete_account") || !strings.Contains(out, "100%") {
		t.Errorf("stats: %v\n%s", err, out)
	}
}
