package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/belayrun/belay/store/postgres"
	"github.com/belayrun/belay/store/sqlite"
)

const versionUsage = `usage: belay version [--json]

Prints the version of this binary's module ("(devel)" when it was built from a
checkout rather than installed at a version), the commit it was built from
when the build recorded one, the Go version, and the schema version it
migrates each store to and writes: a store of a higher schema was written by a
newer belay, which this one refuses to write to.`

// versionJSON is what `belay version --json` prints.
type versionJSON struct {
	Module  string `json:"module"`
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from; empty when the
	// build did not record one (go build -buildvcs=false, go run of a
	// single package outside a repository).
	Commit     string `json:"commit"`
	CommitTime string `json:"commit_time"`
	// Modified says the checkout had changes not committed.
	Modified       bool   `json:"modified"`
	GoVersion      string `json:"go_version"`
	OS             string `json:"os"`
	Arch           string `json:"arch"`
	SQLiteSchema   int    `json:"sqlite_schema"`
	PostgresSchema int    `json:"postgres_schema"`
}

func runVersion(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", versionUsage, stdout)
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	v := buildVersion(debug.ReadBuildInfo())
	if *asJSON {
		return writeJSON(stdout, v)
	}
	fmt.Fprintf(stdout, "belay %s\n", v.Version)
	fmt.Fprintf(stdout, "  module   %s\n", v.Module)
	switch {
	case v.Commit == "":
		fmt.Fprintln(stdout, "  commit   unknown (the build recorded none)")
	case v.Modified:
		fmt.Fprintf(stdout, "  commit   %s of %s, with changes not committed\n", v.Commit, v.CommitTime)
	default:
		fmt.Fprintf(stdout, "  commit   %s of %s\n", v.Commit, v.CommitTime)
	}
	fmt.Fprintf(stdout, "  go       %s %s/%s\n", v.GoVersion, v.OS, v.Arch)
	fmt.Fprintf(stdout, "  schema   SQLite %d, PostgreSQL %d\n", v.SQLiteSchema, v.PostgresSchema)
	return nil
}

// buildVersion reads what the Go toolchain recorded in the binary.
func buildVersion(bi *debug.BuildInfo, ok bool) versionJSON {
	v := versionJSON{
		Module: "github.com/belayrun/belay", Version: "(devel)",
		GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		SQLiteSchema: sqlite.SchemaVersion(), PostgresSchema: postgres.SchemaVersion(),
	}
	if !ok {
		return v
	}
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.CommitTime = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}
