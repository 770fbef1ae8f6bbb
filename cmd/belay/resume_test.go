package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

func TestResumeAndKillSwitchCommands(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "belay.db")
	st, err := openStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	// One turn allowed, two needed: the run pauses on max_turns.
	agent := &belay.Agent{Name: "b", Model: scripted.New(scripted.Reply{Calls: []scripted.Call{{Name: "noop"}}}, scripted.Reply{Text: "done"}),
		Tools:  []belay.Tool{{Name: "noop", Call: func(context.Context, json.RawMessage) (json.RawMessage, error) { return json.RawMessage(`{}`), nil }}},
		Budget: belay.Budget{MaxTurns: 1}}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{agent}})
	if err != nil {
		t.Fatal(err)
	}
	paused, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "b", User: "u", Input: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _ := st.GetRun(ctx, "", paused.ID); r.Status != store.StatusPaused || r.StopReason != "max_turns" {
		t.Fatalf("run %s (%s), want paused on max_turns", r.Status, r.StopReason)
	}
	st.Close()

	belayRun := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(ctx, append(args, "--db", db), &out, &errb)
		return out.String() + errb.String(), err
	}
	out, err := belayRun("resume", paused.ID, "--add-turns", "1", "--as", "human:ops")
	if err != nil || !strings.Contains(out, "is queued") {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	if out, err := belayRun("resume", paused.ID); err == nil || !strings.Contains(err.Error(), "only a paused run can be resumed") {
		t.Errorf("resuming a queued run: %v\n%s", err, out)
	}
	if _, err := belayRun("resume", "run_nope"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("resuming an unknown run: %v", err)
	}

	if out, err := belayRun("killswitch", "on", "--tenant", "acme"); err == nil {
		t.Errorf("killswitch on without a reason: %s", out)
	}
	if out, err := belayRun("killswitch", "on", "--tenant", "acme", "--reason", "provider incident"); err != nil || !strings.Contains(out, "engaged for tenant acme") {
		t.Fatalf("killswitch on: %v\n%s", err, out)
	}
	if out, _ := belayRun("killswitch", "status", "--tenant", "acme"); !strings.Contains(out, "engaged for tenant acme: provider incident") {
		t.Errorf("killswitch status: %s", out)
	}
	if out, _ := belayRun("killswitch", "off", "--tenant", "acme"); !strings.Contains(out, "released") {
		t.Errorf("killswitch off: %s", out)
	}
	if out, _ := belayRun("killswitch", "status", "--tenant", "acme"); !strings.Contains(out, "released for tenant acme") {
		t.Errorf("killswitch status after off: %s", out)
	}
}

func TestResolveCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "belay.db")
	st, err := openStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	lost := belay.Tool{Name: "send", Effect: belay.Write, Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		return nil, belay.ErrUnknownOutcome
	}}
	allow := func(context.Context, belay.PolicyCall) (belay.Decision, error) {
		return belay.Decision{Verdict: belay.Allow}, nil
	}
	agent := &belay.Agent{Name: "a", Tools: []belay.Tool{lost}, Policy: allow, PolicyVersion: "allow",
		Model: scripted.New(scripted.Reply{Calls: []scripted.Call{{Name: "send"}}}, scripted.Reply{Text: "sent"})}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{agent}})
	if err != nil {
		t.Fatal(err)
	}
	paused, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "a", User: "u", Input: "send it"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	effects, _ := st.Effects(ctx, "", paused.ID)
	st.Close()
	if len(effects) != 1 {
		t.Fatalf("%d effects", len(effects))
	}
	var out, errb bytes.Buffer
	if err := run(ctx, []string{"resolve", paused.ID, effects[0].Key, "--applied", "--not-applied", "--db", db}, &out, &errb); err == nil {
		t.Error("--applied and --not-applied together were accepted")
	}
	out.Reset()
	if err := run(ctx, []string{"resolve", paused.ID, effects[0].Key, "--applied", "--result", `{"message_id":"M-1"}`, "--as", "human:ops", "--db", db}, &out, &errb); err != nil {
		t.Fatalf("resolve: %v\n%s", err, errb.String())
	}
	if !strings.Contains(out.String(), "is queued") {
		t.Errorf("resolve said %q", out.String())
	}
}

// A word after the flags is not taken for nothing: "killswitch on ...
// acme" would engage every tenant's switch.
func TestKillSwitchRefusesAStrayArgument(t *testing.T) {
	db := filepath.Join(t.TempDir(), "belay.db")
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"start", "--db", db, "--user", "ada", "--request-id", "T-1", "--input", "hi"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	err := run(t.Context(), []string{"killswitch", "on", "--db", db, "--reason", "incident", "acme"}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), `unexpected "acme"`) {
		t.Errorf("killswitch on ... acme: %v, want it refused", err)
	}
	out.Reset()
	if err := run(t.Context(), []string{"killswitch", "status", "--db", db}, &out, &errb); err != nil || strings.Contains(out.String(), "engaged") {
		t.Errorf("status after the refused command: %v\n%s", err, out.String())
	}
}

// --result says what an applied side effect returned; with --not-applied it
// is refused, not silently dropped.
func TestResolveNotAppliedRefusesAResult(t *testing.T) {
	var out, errb bytes.Buffer
	err := run(t.Context(), []string{"resolve", "run_x", "key_x", "--not-applied", "--result", `{"refund_id":"RF-7"}`, "--db", filepath.Join(t.TempDir(), "belay.db")}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "--result goes with --applied") {
		t.Errorf("resolve --not-applied --result: %v, want a usage error", err)
	}
}
