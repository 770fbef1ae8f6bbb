package main

import (
	"database/sql"
	"encoding/json"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

// belay version names the schema each store is migrated to: the version a
// new SQLite file is given, and the count of each engine's migrations.
func TestVersionNamesTheSchemaItWrites(t *testing.T) {
	t.Parallel()
	out, err := belayCmd(t, "version", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var v versionJSON
	if err := json.Unmarshal([]byte(out), &v); err != nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("version --json: %q, %v; want one line of JSON", out, err)
	}
	if v.Module != "github.com/belayrun/belay" || v.Version == "" || v.GoVersion != runtime.Version() {
		t.Errorf("version --json: %+v", v)
	}

	db := filepath.Join(t.TempDir(), "belay.db")
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
	var written int
	if err := conn.QueryRow("PRAGMA user_version").Scan(&written); err != nil {
		t.Fatal(err)
	}
	for engine, c := range map[string]struct{ got, want int }{
		"sqlite, written":      {v.SQLiteSchema, written},
		"sqlite, migrations":   {v.SQLiteSchema, migrationFiles(t, "sqlite")},
		"postgres, migrations": {v.PostgresSchema, migrationFiles(t, "postgres")},
	} {
		if c.got != c.want || c.got == 0 {
			t.Errorf("%s: version says schema %d, want %d", engine, c.got, c.want)
		}
	}

	out, err = belayCmd(t, "version")
	if err != nil || !strings.HasPrefix(out, "belay "+v.Version+"\n") || !strings.Contains(out, "SQLite "+strconv.Itoa(v.SQLiteSchema)) {
		t.Errorf("version: %q, %v", out, err)
	}
}

func migrationFiles(t *testing.T, engine string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "store", engine, "migration", "*.up.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations of %s: %v, %v", engine, files, err)
	}
	return len(files)
}

// What the toolchain recorded is reported: an installed version, the
// commit and whether the checkout had changes; without build information,
// (devel).
func TestBuildVersion(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "github.com/belayrun/belay", Version: "v0.4.1"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "93ae40f"}, {Key: "vcs.time", Value: "2026-11-30T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	v := buildVersion(bi, true)
	if v.Version != "v0.4.1" || v.Commit != "93ae40f" || v.CommitTime != "2026-11-30T10:00:00Z" || !v.Modified || v.GoVersion != "go1.26.0" {
		t.Errorf("installed build: %+v", v)
	}
	if v := buildVersion(nil, false); v.Version != "(devel)" || v.Commit != "" || v.GoVersion != runtime.Version() {
		t.Errorf("no build information: %+v", v)
	}
}
