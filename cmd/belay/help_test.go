package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// verbs are the commands of the table that take a verb first, with their
// verbs: each verb has its own usage.
var verbs = map[string][]string{
	"keys":       {"create", "list", "revoke"},
	"webhooks":   {"add", "list"},
	"schedules":  {"add", "list", "remove"},
	"stats":      {"approvals"},
	"killswitch": {"on", "off", "status"},
	"policy":     {"simulate", "check"},
}

// Every command of the table, and every verb of those that take one,
// answers -h and --help with its usage on stdout, nothing on stderr and
// exit status 0, and does nothing else: no store is opened or created,
// here or at the default path.
func TestEveryCommandAnswersHelp(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("BELAY_DB", filepath.Join(dir, "env.db"))
	t.Setenv("BELAY_DATABASE_URL", "")
	var invocations [][]string
	for _, c := range commands() {
		invocations = append(invocations, []string{c.name})
		for _, v := range verbs[c.name] {
			invocations = append(invocations, []string{c.name, v})
		}
	}
	for _, inv := range invocations {
		for _, h := range []string{"-h", "--help"} {
			args := append(slices.Clone(inv), h, "--db", filepath.Join(dir, "flag.db"))
			var out, errb bytes.Buffer
			err := run(t.Context(), args, &out, &errb)
			if code := exitCode(err); code != 0 {
				t.Errorf("belay %s: exit status %d (%v), want 0", strings.Join(args, " "), code, err)
			}
			if want := "usage: belay " + strings.Join(inv, " "); !strings.HasPrefix(out.String(), want) {
				t.Errorf("belay %s: stdout %q, want the usage, starting %q", strings.Join(args, " "), out.String(), want)
			}
			if errb.Len() > 0 {
				t.Errorf("belay %s: stderr %q, want nothing", strings.Join(args, " "), errb.String())
			}
		}
	}
	// belay help COMMAND is COMMAND -h.
	var out, errb bytes.Buffer
	if err := run(t.Context(), []string{"help", "runs"}, &out, &errb); exitCode(err) != 0 || !strings.HasPrefix(out.String(), "usage: belay runs") {
		t.Errorf("belay help runs: %v, %q", err, out.String())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("asking for help left %s in the working directory", e.Name())
	}
}

// The exit status comes from run's error, in main alone: 0 for none and
// for help (the usage was printed), 2 for a usage error, 1 for any other.
func TestExitCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{flag.ErrHelp, 0},
		{fmt.Errorf("keys: %w", flag.ErrHelp), 0},
		{usageError{"runs: unexpected argument"}, 2},
		{fmt.Errorf("start: %w", usageError{"no input"}), 2},
		{errors.New("open store x.db: no such file"), 1},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}
