package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestBackupCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "bench.db")
	if _, err := belayCmd(t, "bench", "--runs", "3", "--steps", "2", "--concurrency", "3", "--db", db); err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(dir, "copy.db")
	out, err := belayCmd(t, "backup", copyPath, "--db", db)
	if err != nil || !strings.Contains(out, "backed up "+db+" to "+copyPath) {
		t.Fatalf("backup: %q, %v", out, err)
	}
	out, err = belayCmd(t, "runs", "--db", copyPath, "--status", "done")
	if err != nil || strings.Count(out, "bench") < 3 {
		t.Errorf("runs of the backup: %q, %v; want the 3 bench runs", out, err)
	}

	if _, err := belayCmd(t, "backup", copyPath, "--db", db); err == nil || !strings.Contains(err.Error(), "never overwrites") {
		t.Errorf("backup onto the earlier backup: %v, want a refusal", err)
	}
	if _, err := belayCmd(t, "backup", filepath.Join(dir, "x.db"), "--db", filepath.Join(dir, "missing.db")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("backup of a missing database: %v", err)
	}
	for _, args := range [][]string{
		{"backup", "--db", db},
		{"backup", "a.db", "b.db", "--db", db},
		{"backup", "a.db", "--database-url", "postgres://u:secret@h/db"},
	} {
		_, err := belayCmd(t, args...)
		var ue usageError
		if !errors.As(err, &ue) || strings.Contains(err.Error(), "secret") {
			t.Errorf("%q: %v, want a usage error without the password", args, err)
		}
	}
}
