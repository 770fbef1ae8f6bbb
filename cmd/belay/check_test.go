package main

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayrun/belay/store/sqlite"
	"github.com/belayrun/belay/store/sqlite/sqlitetest"
)

// checkFixture writes a store of 300 runs and returns its path, with the
// interior pages of the runs table damaged if damaged is set.
func checkFixture(t *testing.T, damaged bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "belay.db")
	s, err := sqlite.Open(t.Context(), path, sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	sqlitetest.CreateRuns(t, s, 300)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if damaged {
		sqlitetest.DamageInterior(t, path, "runs")
	}
	return path
}

func TestCheckCommand(t *testing.T) {
	t.Parallel()
	intact := checkFixture(t, false)
	for _, quick := range []bool{false, true} {
		args := []string{"check", "--db", intact}
		pragma := "integrity_check"
		if quick {
			args, pragma = append(args, "--quick"), "quick_check"
		}
		out, err := belayCmd(t, args...)
		if err != nil || !strings.HasPrefix(out, "ok: "+intact+" ("+pragma) {
			t.Errorf("%q: %q, %v; want ok", args, out, err)
		}
		out, err = belayCmd(t, append(args, "--json")...)
		var got map[string]any
		if err != nil || json.Unmarshal([]byte(out), &got) != nil {
			t.Fatalf("%q --json: %q, %v", args, out, err)
		}
		if got["ok"] != true || got["check"] != pragma || got["db"] != intact || got["problems"] == nil {
			t.Errorf("%q --json: %s", args, out)
		}
		for _, k := range []string{"bytes", "duration_ms"} {
			if _, ok := got[k]; !ok {
				t.Errorf("%q --json: no %s in %s", args, k, out)
			}
		}
	}

	damaged := checkFixture(t, true)
	out, err := belayCmd(t, "check", "--db", damaged)
	var ue usageError
	if err == nil || errors.As(err, &ue) || !strings.Contains(err.Error(), damaged+" is damaged") {
		t.Errorf("check of a damaged file: error %v, want one saying the file is damaged (exit status 1)", err)
	}
	for _, want := range []string{damaged + " is damaged: integrity_check found", "malformed", "belay backup"} {
		if !strings.Contains(out, want) {
			t.Errorf("check of a damaged file: %q does not say %q", out, want)
		}
	}
	out, err = belayCmd(t, "check", "--db", damaged, "--json")
	var got struct {
		OK       bool     `json:"ok"`
		Problems []string `json:"problems"`
	}
	if err == nil || json.Unmarshal([]byte(out), &got) != nil || got.OK || len(got.Problems) == 0 {
		t.Errorf("check --json of a damaged file: %q, %v; want ok false, the problems, and an error", out, err)
	}

	if _, err := belayCmd(t, "check", "--db", filepath.Join(t.TempDir(), "missing.db")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("check of a missing file: %v", err)
	}
	for _, args := range [][]string{
		{"check", "--db", intact, "extra"},
		{"check", "--database-url", "postgres://u:secret@h/db"},
	} {
		_, err := belayCmd(t, args...)
		if !errors.As(err, &ue) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: %v, want a usage error without the password", args, err)
		}
	}
	if _, err := belayCmd(t, "check", "--database-url", "postgres://u@h/db"); err == nil || !strings.Contains(err.Error(), "pg_amcheck") {
		t.Errorf("check on PostgreSQL: %v, want it to say how PostgreSQL is checked", err)
	}
}

// The exit status a script acts on: 0 for a sound file, 1 for a damaged
// one, 2 for a mistake in how belay was invoked.
func TestCheckExitStatus(t *testing.T) {
	t.Parallel()
	bin := belayBinary(t)
	for _, c := range []struct {
		args []string
		want int
	}{
		{[]string{"check", "--db", checkFixture(t, false)}, 0},
		{[]string{"check", "--db", checkFixture(t, true)}, 1},
		{[]string{"check", "--database-url", "postgres://u@h/db"}, 2},
	} {
		err := exec.Command(bin, c.args...).Run()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.want {
			t.Errorf("belay %q: exit status %d, want %d", c.args, code, c.want)
		}
	}
}
