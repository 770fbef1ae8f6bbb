package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// fixture is a store with two finished runs in it.
type fixture struct {
	db string
	// done looked an order up, refunded it (one side effect), called a tool
	// that does not exist and answered: done after 2 steps and 3 model
	// calls.
	done string
	// failed got a bad request from its model on the first call.
	failed string
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	ctx := t.Context()
	f := fixture{db: filepath.Join(t.TempDir(), "belay.db")}
	s, err := openStore(ctx, f.db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	lookup := belay.Tool{Name: "lookup", Effect: belay.Read,
		Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"order":"A1","amount":29}`), nil
		}}
	refund := belay.Tool{Name: "refund", Effect: belay.Write, KeyFields: []string{"order"},
		Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"refunded":true}`), nil
		}}
	support := &belay.Agent{
		Name:   "support",
		Tools:  []belay.Tool{lookup, refund},
		Prices: scripted.Prices,
		Model: scripted.New(
			scripted.Reply{Text: "PLAN: look up the order; refund it", Calls: []scripted.Call{{Name: "lookup", Args: map[string]string{"order": "A1"}}}},
			scripted.Reply{Calls: []scripted.Call{{Name: "refund", Args: map[string]any{"order": "A1", "amount": 29}}, {Name: "nope"}}},
			scripted.Reply{Text: "Refunded order A1."},
		),
	}
	broken := &belay.Agent{
		Name:  "broken",
		Model: scripted.New(scripted.Reply{Err: errors.New("400 bad request")}),
	}
	rt, err := belay.New(belay.Config{Store: s, Agents: []*belay.Agent{support, broken}})
	if err != nil {
		t.Fatal(err)
	}
	a, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "support", User: "alice", ClientRequestID: "r1", Input: "Refund order A1"})
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "broken", User: "bob", ClientRequestID: "r2", Input: "Hello"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	f.done, f.failed = a.ID, b.ID
	for id, want := range map[string]store.Status{f.done: store.StatusDone, f.failed: store.StatusFailed} {
		run, err := s.GetRun(ctx, "", id)
		if err != nil {
			t.Fatal(err)
		}
		if run.Status != want {
			t.Fatalf("fixture run %s is %s (%s: %s), want %s", id, run.Status, run.StopReason, run.StopDetail, want)
		}
	}
	return f
}

// belayCmd runs the CLI as main would, returning stdout and the error.
func belayCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(t.Context(), args, &out, &errb)
	return out.String(), err
}

func TestOpenExistingStoreMissingFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "nope.db")
	for _, cmd := range []string{"runs", "show", "trace"} {
		args := []string{cmd, "--db", path}
		if cmd != "runs" {
			args = append(args, "run_x")
		}
		_, err := belayCmd(t, args...)
		if err == nil || !strings.Contains(err.Error(), "open store "+path+": no such file") {
			t.Errorf("%s with a missing database: got error %v, want one saying the file does not exist", cmd, err)
		}
	}
	if _, err := openExistingStore(t.Context(), path); err == nil {
		t.Fatal("openExistingStore created a database")
	}
}

func TestOpenStoreNotBelay(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(path, []byte(strings.Repeat("not a database. ", 20)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := belayCmd(t, "runs", "--db", path)
	if err == nil || !strings.Contains(err.Error(), "open store "+path) {
		t.Fatalf("got error %v, want one naming the file", err)
	}
}

// --db given on the command line names the store even when
// $BELAY_DATABASE_URL is set (the README has users export it), and both
// flags given is an error, not a guess.
func TestDBFlagWinsOverTheURLInTheEnvironment(t *testing.T) {
	db := filepath.Join(t.TempDir(), "belay.db")
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"start", "--db", db, "--user", "ada", "--request-id", "T-1", "--input", "hello"}, &out, &errb); err != nil {
		t.Fatalf("start: %v\n%s", err, errb.String())
	}
	t.Setenv("BELAY_DATABASE_URL", "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	out.Reset()
	if err := run(t.Context(), []string{"runs", "--db", db}, &out, &errb); err != nil || !strings.Contains(out.String(), "queued") {
		t.Errorf("runs --db with $BELAY_DATABASE_URL set: %v\n%s", err, out.String())
	}
	err := run(t.Context(), []string{"runs", "--db", db, "--database-url", "postgres://nobody@127.0.0.1:1/none"}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "both --db and --database-url") {
		t.Errorf("runs with both flags: %v, want an error naming both", err)
	}
}

// A password never reaches a message, wherever the connection string
// carries it.
func TestRedactURLHidesEveryPassword(t *testing.T) {
	for _, raw := range []string{
		"postgres://postgres:hunter2@127.0.0.1:5432/test",
		"postgres://postgres@127.0.0.1:5432/test?sslmode=disable&password=hunter2",
		"host=127.0.0.1 user=postgres password=hunter2 dbname=test",
		"host=127.0.0.1 password='hunter2 with spaces' dbname=test",
	} {
		if got := redactURL(raw); strings.Contains(got, "hunter2") {
			t.Errorf("redactURL(%q) = %q", raw, got)
		}
	}
}

// A mistyped flag is a usage error (exit status 2) on every command, as on
// those that check their own arguments.
func TestMistypedFlagIsAUsageError(t *testing.T) {
	for _, cmd := range []string{"runs", "show", "trace", "prune", "backup", "bench", "approvals"} {
		var out, errb bytes.Buffer
		err := run(t.Context(), []string{cmd, "--no-such-flag"}, &out, &errb)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%s --no-such-flag: %v, want a usage error", cmd, err)
		}
	}
}
