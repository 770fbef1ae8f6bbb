package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"

	_ "embed"
)

//go:embed query/backup.sql
var backupSQL string

// Backup writes a consistent copy of the database to a new file at path,
// while runs go on: the copy is one read transaction's snapshot, so it
// holds every step committed before it began and none after, and the
// writer is never held up. Copying the file itself would not do: what the
// WAL holds is not in it yet, and a copy taken mid-commit may be corrupt.
//
// The copy is compact (free pages are left out) and durable when Backup
// returns. Belay opens it like any store; the file at path must not exist.
func (s *Store) Backup(ctx context.Context, path string) error {
	// Absolute, so that SQLite never reads a name such as "file:x" as a
	// URI naming another file than the one claimed here.
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("back up to %s: %w", path, err)
	}
	// Creating the file claims the name: another file there is never
	// written over, and the file removed after a failure is this one.
	f, err := os.OpenFile(abs, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("back up to %s: %w: a backup never overwrites a file", path, err)
	}
	if err != nil {
		return fmt.Errorf("back up to %s: %w", path, err)
	}
	f.Close()
	if err := s.vacuumInto(ctx, abs); err != nil {
		os.Remove(abs)
		return fmt.Errorf("back up to %s: %w", path, err)
	}
	return nil
}

// vacuumInto writes the copy into the empty file at path and makes it
// durable, with its name.
func (s *Store) vacuumInto(ctx context.Context, path string) error {
	// VACUUM INTO writes a file, which a query_only connection may not;
	// it reads the database as any reader does.
	db, err := openWatched(fileURI(s.path, pragmas(s.cfg)), s.damage)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, backupSQL, sql.Named("path", path)); err != nil {
		return err
	}
	if err := syncPath(path); err != nil {
		return err
	}
	if runtime.GOOS == "windows" {
		return nil // directories cannot be opened for a sync there
	}
	return syncPath(filepath.Dir(path))
}

// syncPath makes a file, or the names in a directory, durable.
func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}
