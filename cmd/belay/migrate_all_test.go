package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/belayrun/belay/store"
)

// belay migrate --all moves every run paused on a version mismatch at
// --from, says how many, and refuses to guess a version.
func TestMigrateAllCommand(t *testing.T) {
	ctx := t.Context()
	d := newDataStore(t)
	st, err := openStore(ctx, d.db)
	if err != nil {
		t.Fatal(err)
	}
	paused, err := st.GetRun(ctx, "", d.version)
	st.Close()
	if err != nil || paused.StopReason != "version_mismatch" {
		t.Fatalf("the fixture's mismatched run: %+v, %v", paused, err)
	}
	migrate := func(args ...string) (string, error) {
		var out, errb bytes.Buffer
		err := run(ctx, append([]string{"migrate", "--db", d.db}, args...), &out, &errb)
		return out.String(), err
	}
	var ue usageError
	for _, args := range [][]string{
		{"--all", "--to", d.toVersion},
		{"--all", "--from", paused.AgentVersion},
		{"--all", "--from", paused.AgentVersion, "--to", d.toVersion, d.version},
		{"--all", "--from", paused.AgentVersion, "--to", d.toVersion, "--batch", "0"},
	} {
		if _, err := migrate(args...); !errors.As(err, &ue) {
			t.Errorf("migrate %s: %v, want a usage error", strings.Join(args, " "), err)
		}
	}
	// A run of an agent this binary cannot replay stays where it is.
	out, err := migrate("--all", "--from", paused.AgentVersion, "--to", d.toVersion, "--if-replay-passes")
	if err != nil || !strings.Contains(out, "0 runs moved") || !strings.Contains(out, "1 runs stay paused") || !strings.Contains(out, d.version) {
		t.Errorf("migrate --all --if-replay-passes: %q, %v", out, err)
	}
	out, err = migrate("--all", "--from", paused.AgentVersion, "--to", d.toVersion, "--batch", "1", "--as", "human:ops", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Moved   int      `json:"moved"`
		Batches int      `json:"batches"`
		Runs    []string `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Moved != 1 || len(res.Runs) != 1 || res.Runs[0] != d.version {
		t.Fatalf("migrate --all --json printed %q (%v)", out, err)
	}
	st, err = openStore(ctx, d.db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	moved, err := st.GetRun(ctx, "", d.version)
	if err != nil || moved.Status != store.StatusQueued || moved.AgentVersion != d.toVersion {
		t.Errorf("after migrate --all the run is %s on %s, %v", moved.Status, moved.AgentVersion, err)
	}
	out, err = migrate("--all", "--from", paused.AgentVersion, "--to", d.toVersion)
	if err != nil || !strings.HasPrefix(out, "0 runs moved from version "+paused.AgentVersion) {
		t.Errorf("a second migrate --all: %q, %v", out, err)
	}
}
