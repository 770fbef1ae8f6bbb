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

func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "belay.db")
	st, err := openStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	v1 := &belay.Agent{Name: "a", Version: "v1", Model: scripted.New()}
	rt1, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{v1}})
	if err != nil {
		t.Fatal(err)
	}
	paused, _, err := rt1.StartRun(ctx, belay.RunRequest{Agent: "a", Tenant: "acme", User: "u", Input: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	v2 := &belay.Agent{Name: "a", Version: "v2", Model: scripted.New(scripted.Reply{Text: "done on v2"})}
	rt2, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{v2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt2.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _ := st.GetRun(ctx, "", paused.ID); r.Status != store.StatusPaused || r.StopReason != "version_mismatch" {
		t.Fatalf("run %s (%s), want paused on version_mismatch", r.Status, r.StopReason)
	}
	st.Close()

	belayRun := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(ctx, append(args, "--db", db), &out, &errb)
		return out.String() + errb.String(), err
	}
	var ue usageError
	if _, err := belayRun("migrate", paused.ID); !errors.As(err, &ue) || !strings.Contains(err.Error(), "this worker has version v2") {
		t.Errorf("migrate without --to-version: %v, want a usage error quoting the stop detail", err)
	}
	if _, err := belayRun("migrate", paused.ID, "--to-version", "v2", "--tenant", "globex"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("migrate in another tenant: %v", err)
	}
	out, err := belayRun("migrate", paused.ID, "--to-version", "v2", "--tenant", "acme", "--as", "human:ops")
	if err != nil || !strings.Contains(out, "moved from a version v1 to v2 and is queued") {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	if out, err := belayRun("migrate", paused.ID, "--to-version", "v2"); err == nil || !strings.Contains(err.Error(), "only a run paused on version_mismatch is migrated") {
		t.Errorf("migrating a queued run: %v\n%s", err, out)
	}
	if _, err := belayRun("migrate", "run_nope", "--to-version", "v2"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("migrating an unknown run: %v", err)
	}

	st, err = openStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	events, err := st.Events(ctx, paused.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := events[len(events)-1]
	var data map[string]any
	if err := json.Unmarshal(last.Data, &data); err != nil || last.Type != "migrated" ||
		data["from"] != "v1" || data["to"] != "v2" || data["by"] != "human:ops" {
		t.Errorf("last event %s %s (%v), want migrated from v1 to v2 by human:ops", last.Type, last.Data, err)
	}
	rt2, err = belay.New(belay.Config{Store: st, Agents: []*belay.Agent{v2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt2.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if r, _ := st.GetRun(ctx, "", paused.ID); r.Status != store.StatusDone || r.Final != "done on v2" {
		t.Errorf("after the migration the run is %s (%s: %s)", r.Status, r.StopReason, r.StopDetail)
	}
}
