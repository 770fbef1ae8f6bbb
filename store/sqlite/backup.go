package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"

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
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("back up to %s: %w: a backup never overwrites a file", path, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("back up to %s: %w", path, err)
	}
	// VACUUM INTO writes a file, which a query_only connection may not;
	// it reads the database as any reader does.
	db, err := sql.Open("sqlite", fileURI(s.path, pragmas(s.cfg)))
	if err != nil {
		return fmt.Errorf("back up to %s: %w", path, err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, backupSQL, sql.Named("path", path)); err != nil {
		os.Remove(path)
		return fmt.Errorf("back up to %s: %w", path, err)
	}
	if err := syncFile(path); err != nil {
		return fmt.Errorf("back up to %s: %w", path, err)
	}
	return nil
}

// syncFile makes a written file durable.
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}
