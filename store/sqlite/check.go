package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"

	_ "embed"
)

//go:embed query/integrity_check.sql
var integrityCheckSQL string

//go:embed query/quick_check.sql
var quickCheckSQL string

// CheckMode is how thoroughly Check reads the file.
type CheckMode int

const (
	// FullCheck is SQLite's integrity_check: every page, every b-tree, and
	// that each index holds exactly its table's rows.
	FullCheck CheckMode = iota
	// QuickCheck is SQLite's quick_check: every page and b-tree, without
	// comparing indexes with their tables. It takes a third of the time.
	QuickCheck
)

// Check runs SQLite's integrity check over the database file at path and
// returns the problems it found, as SQLite words them (the first 100);
// none for a sound file. An error means the check could not run.
//
// The file is opened read-only, apart from any store: Check never writes
// to it, damaged or not, and runs beside workers writing it, reading one
// snapshot of it in a read transaction. It reads the whole file (see Open
// for what that costs).
func Check(ctx context.Context, path string, mode CheckMode) ([]string, error) {
	query := integrityCheckSQL
	if mode == QuickCheck {
		query = quickCheckSQL
	}
	// SQLite would take a missing file for a new, empty database, and a
	// file shorter than its header for an empty one.
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("check %s: %w", path, err)
	}
	header, err := readHeader(path)
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", path, err)
	}
	if string(header) != sqliteHeader {
		return nil, openError(path, errNoHeader)
	}

	db, err := sql.Open("sqlite", checkDSN(path))
	if err != nil {
		return nil, fmt.Errorf("check %s: %w", path, err)
	}
	defer db.Close()
	var problems []string
	rows, err := db.QueryContext(ctx, strings.TrimSpace(query))
	if err == nil {
		for rows.Next() {
			var p string
			if err := rows.Scan(&p); err != nil {
				rows.Close()
				return nil, fmt.Errorf("check %s: %w", path, err)
			}
			// SQLite heads the problems of each attached database so.
			if p != "ok" && !strings.HasPrefix(p, "*** in database ") {
				problems = append(problems, p)
			}
		}
		err = errors.Join(rows.Err(), rows.Close())
	}
	switch {
	case err == nil:
		return problems, nil
	case isCorrupt(err):
		// The check itself reached a page it cannot read: that is a
		// finding, not a failure to check.
		return append(problems, "the check stopped on a page SQLite cannot read: "+err.Error()), nil
	default:
		return nil, fmt.Errorf("check %s: %w", path, err)
	}
}

// checkDSN opens the file read-only: not even the checkpoint a read-write
// connection runs when it is the file's last one is allowed.
func checkDSN(path string) string {
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(Config{}.withDefaults().BusyTimeout.Milliseconds(), 10)+")")
	return fileURI(path, q)
}
