package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
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
	if _, err := openExistingStore(t.Context(), path, true); err == nil {
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

// readOnlyCommands only read the store; the first argument is replaced by
// a run id.
var readOnlyCommands = [][]string{
	{"runs"}, {"show", "RUN"}, {"trace", "RUN"}, {"approvals"}, {"stats", "approvals"},
	{"killswitch", "status"}, {"keys", "list"}, {"webhooks", "list", "--tenant", "acme"},
	{"backup", "BACKUP"}, {"check"},
}

// writingCommands change a store that must exist.
var writingCommands = [][]string{
	{"approve", "ap_x"}, {"reject", "ap_x", "--note", "no"}, {"resume", "RUN"}, {"resolve", "RUN", "key_x", "--not-applied"},
	{"migrate", "RUN", "--to-version", "v2"}, {"killswitch", "on", "--reason", "incident"}, {"prune", "--older-than", "1h"},
	{"keys", "revoke", "key_x", "--tenant", "acme"}, {"webhooks", "add", "https://example.com/hook", "--tenant", "acme"},
}

func withArgs(args []string, dir string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		switch a {
		case "RUN":
			out[i] = "run_x"
		case "BACKUP":
			out[i] = filepath.Join(dir, "copy.db")
		}
	}
	return out
}

// A file that holds no store (zero bytes, or a SQLite database without a
// table) given as --db is refused, by every command that does not create
// stores, and left as it was: opening it would have made it a new, empty
// store, as a mistyped or truncated --db.
func TestCommandsRefuseAnEmptyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	blank := filepath.Join(dir, "blank.db")
	conn, err := sql.Open("sqlite", blank)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec("CREATE TABLE t (x); DROP TABLE t"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	blankBytes, err := os.ReadFile(blank)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []struct {
		path  string
		bytes []byte
	}{{empty, nil}, {blank, blankBytes}} {
		for _, args := range append(slices.Clone(readOnlyCommands), writingCommands...) {
			args = append(withArgs(args, dir), "--db", f.path)
			_, err := belayCmd(t, args...)
			if err == nil || !strings.Contains(err.Error(), f.path) || !strings.Contains(err.Error(), "holds no Belay store") {
				t.Errorf("belay %s: %v, want it refused, saying the file holds no store", strings.Join(args, " "), err)
			}
			if got, _ := os.ReadFile(f.path); !bytes.Equal(got, f.bytes) {
				t.Fatalf("belay %s changed %s", strings.Join(args, " "), f.path)
			}
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("the commands left files beside the empty ones: %v", entries)
	}
}

// A command that only reads never migrates: a store of an older schema is
// refused, untouched, with what to do.
func TestReadOnlyCommandsDoNotMigrate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "old.db")
	st, err := openStore(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	conn, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	older := sqlite.SchemaVersion() - 1
	if _, err := conn.Exec(fmt.Sprintf("PRAGMA user_version = %d", older)); err != nil {
		t.Fatal(err)
	}
	for _, args := range readOnlyCommands {
		if args[0] == "check" {
			continue // SQLite's own check, of any file, reads and never writes
		}
		args = append(withArgs(args, dir), "--db", db)
		_, err := belayCmd(t, args...)
		if err == nil || !strings.Contains(err.Error(), "older") || !strings.Contains(err.Error(), "belay serve") {
			t.Errorf("belay %s on a store of schema %d: %v, want it refused, saying how to migrate it", strings.Join(args, " "), older, err)
		}
		var v int
		if err := conn.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != older {
			t.Fatalf("belay %s: schema %d (%v), want it left at %d", strings.Join(args, " "), v, err, older)
		}
	}
}
