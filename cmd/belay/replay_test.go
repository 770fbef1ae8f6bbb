package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// belay replay replays the support runs a filter names on the script
// without the note, prints each one's comparison and the totals, and
// leaves the world as it was.
func TestReplayCommand(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := t.TempDir() + "/belay.db"
	st, err := openStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	world, err := support.OpenWorld(ctx, db+".world")
	if err != nil {
		t.Fatal(err)
	}
	defer world.Close()
	if err := world.SeedTickets(ctx, 3); err != nil {
		t.Fatal(err)
	}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{support.NewAgent(world, scripted.Func(support.Script()))}, HumanApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		ticket := support.TicketSeed(i)
		if _, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: support.AgentName, Tenant: "acme", User: ticket.Email,
			ClientRequestID: ticket.ID, Input: ticket.Input()}); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		if err := rt.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		pending, _ := st.Approvals(ctx, store.ListApprovalsParams{Status: store.ApprovalPending})
		for _, a := range pending {
			if _, err := rt.Decide(ctx, a.Tenant, a.ID, belay.ApprovalDecision{Choice: belay.Approve, By: "human:rita"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	st.Close()
	before, err := world.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	replay := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(ctx, append([]string{"replay", "--db", db}, args...), &out, &errb)
		return out.String(), err
	}
	out, err := replay("--runs", "status=done,limit=10", "--model", "scripted-without-note", "--json")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("replay --json printed %d lines:\n%s", len(lines), out)
	}
	for _, line := range lines {
		var r belay.ReplayResult
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Same != 2 || r.Missing != 1 || r.Extra != 0 || r.Turns != 7 {
			t.Errorf("replay line %s (%v): want 2 same, the note missing, 7 turns", line, err)
		}
	}
	out, err = replay("--runs", "all")
	if err != nil || !strings.Contains(out, "total 3") || !strings.Contains(out, "3 verified") {
		t.Errorf("replay --runs all printed %q, %v", out, err)
	}
	if after, _ := world.Counts(ctx); after != before {
		t.Errorf("the world after the replays: %+v, want %+v", after, before)
	}
	var ue usageError
	for _, args := range [][]string{{}, {"--runs", "colour=blue"}, {"--runs", "all", "--model", "gpt-9"}} {
		if _, err := replay(args...); !errors.As(err, &ue) {
			t.Errorf("replay %v: %v, want a usage error", args, err)
		}
	}
	if _, err := replay("--runs", "run_nope"); err == nil || !strings.Contains(err.Error(), "run_nope") {
		t.Errorf("replay of an unknown run: %v", err)
	}
}
