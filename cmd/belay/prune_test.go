package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPruneCommand(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "bench.db")
	if _, err := belayCmd(t, "bench", "--runs", "3", "--steps", "2", "--concurrency", "3", "--db", db); err != nil {
		t.Fatal(err)
	}
	// The runs ended a moment ago: an hour's age keeps them.
	out, err := belayCmd(t, "prune", "--older-than", "1h", "--db", db)
	if err != nil || !strings.HasPrefix(out, "deleted 0 runs") {
		t.Fatalf("prune --older-than 1h: %q, %v", out, err)
	}
	if out, err := belayCmd(t, "runs", "--db", db); err != nil || strings.Count(out, "done") != 3 {
		t.Fatalf("runs after a prune that deleted none: %q, %v", out, err)
	}
	out, err = belayCmd(t, "prune", "--older-than", "1ns", "--db", db)
	if err != nil || !strings.HasPrefix(out, "deleted 3 runs") {
		t.Fatalf("prune --older-than 1ns: %q, %v", out, err)
	}
	if out, err := belayCmd(t, "runs", "--db", db); err != nil || strings.Contains(out, "done") {
		t.Errorf("runs after the prune: %q, %v; want none", out, err)
	}

	for _, args := range [][]string{
		{"prune", "--db", db},
		{"prune", "--older-than", "soon", "--db", db},
		{"prune", "--older-than", "0d", "--db", db},
		{"prune", "--older-than", "-3h", "--db", db},
		{"prune", "--older-than", "1h", "extra", "--db", db},
	} {
		_, err := belayCmd(t, args...)
		var ue usageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}

func TestParseAge(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"30d": 30 * 24 * time.Hour, "12h": 12 * time.Hour, "90m": 90 * time.Minute, "1d": 24 * time.Hour} {
		if got, err := parseAge(in); err != nil || got != want {
			t.Errorf("parseAge(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if got, err := parseAge("106751d"); err != nil || got != 106751*24*time.Hour {
		t.Errorf("parseAge(106751d) = %v, %v", got, err)
	}
	for _, in := range []string{"", "d", "1.5d", "x", "0", "-1d", "0s", "106752d", "213504d", "12169727d", "99999999999999999999d"} {
		if _, err := parseAge(in); err == nil {
			t.Errorf("parseAge(%q): no error", in)
		}
	}
}

func TestServeKeepEndedFlag(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "belay.db")
	for _, v := range []string{"soon", "0d", "-1h"} {
		_, err := belayCmd(t, "serve", "--keep-ended", v, "--db", db)
		var ue usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--keep-ended") {
			t.Errorf("serve --keep-ended %s: %v, want a usage error naming the flag", v, err)
		}
	}
}
