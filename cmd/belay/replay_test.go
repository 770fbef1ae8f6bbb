package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
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

// belay replay replays the runs of an agent of the agents file on the
// file's model, and says what to do with the runs of an agent it cannot
// build without the file.
func TestReplayCommandReplaysAnAgentOfTheFile(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-never-checked")
	ctx := t.Context()
	var calls atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"hello again"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}`)
	}))
	defer api.Close()
	dir := t.TempDir()
	db, file := filepath.Join(dir, "belay.db"), filepath.Join(dir, "belay.yaml")
	yaml := "agents:\n  - name: helper\n    instructions: Greet.\n    model: {provider: openai, name: gpt-4o-mini, base_url: \"" + api.URL + "/v1\"}\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := openStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{{Name: "helper", Instructions: "Greet.",
		Model: scripted.New(scripted.Reply{Text: "hello"})}}})
	if err != nil {
		t.Fatal(err)
	}
	recorded, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "helper", User: "ada", Input: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()
	replay := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(ctx, append([]string{"replay", "--db", db}, args...), &out, &errb)
		return out.String(), err
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--runs", "all"}, "the runs of another agent need --agent NAME, and --config FILE"},
		{[]string{"--runs", recorded.ID}, "is a run of agent helper, not of support; replay it with --agent helper (and --config FILE"},
		{[]string{"--runs", "all", "--agent", "helper"}, "pass --config FILE, the agents file belay serve runs it from"},
		{[]string{"--runs", "all", "--config", file, "--agent", "nobody"}, `has no agent named "nobody"; it has helper`},
		{[]string{"--runs", "all", "--config", file, "--model", "fallback"}, "has no fallback model"},
		{[]string{"--runs", "all", "--config", file, "--model", "scripted"}, "want primary (the file's model) or fallback"},
	} {
		if _, err := replay(c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("replay %v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
	if calls.Load() != 0 {
		t.Fatalf("the model was called %d times by refused replays", calls.Load())
	}
	out, err := replay("--runs", "all", "--config", file, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var r belay.ReplayResult
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &r); err != nil || r.RunID != recorded.ID || r.Status != store.StatusDone || r.Turns != 1 {
		t.Fatalf("replay of the file's agent: %s (%v); want run %s done in one turn", out, err, recorded.ID)
	}
	if calls.Load() != 1 {
		t.Errorf("the file's model was called %d times, want once", calls.Load())
	}
}
