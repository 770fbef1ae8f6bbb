package sqlite

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayrun/belay/store/sqlite/sqlitetest"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "belay.db")
	s, err := Open(t.Context(), path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	sqlitetest.CreateRuns(t, s, 300)
	// Beside a store that has the file open, its last commits still in the
	// write-ahead log.
	for _, mode := range []CheckMode{FullCheck, QuickCheck} {
		if problems, err := Check(t.Context(), path, mode); err != nil || len(problems) > 0 {
			t.Errorf("check %d of an open, intact store: %q, %v", mode, problems, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	pages := sqlitetest.DamageInterior(t, path, "runs")
	before := fileDigest(t, path)
	for _, mode := range []CheckMode{FullCheck, QuickCheck} {
		problems, err := Check(t.Context(), path, mode)
		if err != nil {
			t.Fatalf("check %d of a damaged file: %v", mode, err)
		}
		// What SQLite says depends on the page: an index whose table it
		// cannot count, a page it cannot read.
		if len(problems) == 0 {
			t.Errorf("check %d of a file with damaged pages %v: no problem found", mode, pages)
		}
	}
	if after := fileDigest(t, path); after != before {
		t.Error("Check changed the file")
	}
}

func TestCheckRefuses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.db")
	if _, err := Check(t.Context(), missing, FullCheck); err == nil {
		t.Error("check of a missing file: no error")
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("check of a missing file created it")
	}
	junk := filepath.Join(dir, "junk.db")
	if err := os.WriteFile(junk, []byte("not a database, not at all"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Check(t.Context(), junk, FullCheck); err == nil || !strings.Contains(err.Error(), "is not a SQLite database") {
		t.Errorf("check of a file that is not SQLite: %v", err)
	}
}
