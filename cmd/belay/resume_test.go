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
	if out, _ := belayRun("killswitch", "status", "--tenant", "acme"); !containsLine(strings.Split(out, "\n"), "tenant acme", "ENGAGED: provider incident") {
		t.Errorf("killswitch status: %s", out)
	}
	if out, _ := belayRun("killswitch", "off", "--tenant", "acme"); !strings.Contains(out, "released") {
		t.Errorf("killswitch off: %s", out)
	}
	if out, _ := belayRun("killswitch", "status", "--tenant", "acme"); !containsLine(strings.Split(out, "\n"), "tenant acme", "released") {
		t.Errorf("killswitch status after off: %s", out)
	}
}
