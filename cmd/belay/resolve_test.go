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
)

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

// --result says what an applied side effect returned; with --not-applied it
// is refused, not silently dropped.
func TestResolveNotAppliedRefusesAResult(t *testing.T) {
	var out, errb bytes.Buffer
	err := run(t.Context(), []string{"resolve", "run_x", "key_x", "--not-applied", "--result", `{"refund_id":"RF-7"}`, "--db", filepath.Join(t.TempDir(), "belay.db")}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "--result goes with --applied") {
		t.Errorf("resolve --not-applied --result: %v, want a usage error", err)
	}
}
