package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/belayrun/belay/store/sqlite"
)

// checkJSON is what `belay check --json` prints: one object, whether the
// file is sound or not.
type checkJSON struct {
	DB string `json:"db"`
	// Check is the SQLite pragma that ran: integrity_check or quick_check.
	Check    string   `json:"check"`
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`
	Bytes    int64    `json:"bytes"`
	Millis   int64    `json:"duration_ms"`
}

const checkUsage = `usage: belay check [--db PATH] [--quick] [--json]

Runs SQLite's integrity check over every page of the database file and prints ok, or
the problems found; the exit status is 1 if there are any. The file is opened
read-only and never written, so the check may run while workers go on. It reads the
whole file: about half a second for 83 MB (10,000 runs of 8 steps), a third of that
with --quick. Belay does not check at open; a store that meets a damaged page stops
writing, and its /readyz and belay_store_corrupt say so.
If the file is damaged: stop every belay process on it, move it aside with its -wal and
-shm files, and put the latest copy belay backup wrote in its place.`

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check", checkUsage, stdout)
	db := dbFlag(fs)
	quick := fs.Bool("quick", false, "run SQLite's quick_check: every page and b-tree, without comparing indexes with their tables (a third of the time)")
	asJSON := jsonFlag(fs, "the outcome, one object")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	if err := db.check(); err != nil {
		return usageError{"check: " + err.Error()}
	}
	if db.url != "" {
		schema := db.schema
		if schema == "" {
			schema = "belay"
		}
		return usageError{"check: PostgreSQL checks its own pages (initdb --data-checksums) and belay cannot look beneath it; " +
			"verify tables and indexes with the amcheck extension, for example: pg_amcheck --schema " + schema + " " + redactURL(db.url)}
	}

	// A file that holds no store would pass SQLite's check: a blank
	// database is a sound one.
	if err := holdsStore(ctx, db.path, false); err != nil {
		return fmt.Errorf("check %s: %w", db.path, err)
	}
	info, err := os.Stat(db.path)
	if err != nil {
		return fmt.Errorf("check %s: %w", db.path, err)
	}
	mode, pragma := sqlite.FullCheck, "integrity_check"
	if *quick {
		mode, pragma = sqlite.QuickCheck, "quick_check"
	}
	start := time.Now()
	problems, err := sqlite.Check(ctx, db.path, mode)
	if err != nil {
		return err
	}
	took := time.Since(start)

	if *asJSON {
		out := checkJSON{DB: db.path, Check: pragma, OK: len(problems) == 0, Problems: problems,
			Bytes: info.Size(), Millis: took.Milliseconds()}
		if out.Problems == nil {
			out.Problems = []string{}
		}
		if err := writeJSON(stdout, out); err != nil {
			return err
		}
	} else {
		if len(problems) == 0 {
			fmt.Fprintf(stdout, "ok: %s (%s of %.1f MB in %.2f s)\n", db.path, pragma, float64(info.Size())/(1<<20), took.Seconds())
			return nil
		}
		fmt.Fprintf(stdout, "%s is damaged: %s found %d problems:\n", db.path, pragma, len(problems))
		for _, p := range problems {
			fmt.Fprintf(stdout, "  %s\n", p)
		}
		fmt.Fprintln(stdout, "Stop every belay process on it, move it aside with its -wal and -shm files, and put the")
		fmt.Fprintln(stdout, "latest copy belay backup wrote in its place (belay backup --help).")
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s is damaged: %d problems", db.path, len(problems))
	}
	return nil
}
