package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

// openStore opens the SQLite store at path, creating it if it does not
// exist. Errors say which file and, where it helps, what to do.
func openStore(ctx context.Context, path string) (*sqlite.Store, error) {
	s, err := sqlite.Open(ctx, path, sqlite.Config{})
	switch {
	case err == nil:
		return s, nil
	case errors.Is(err, store.ErrNotBelay):
		return nil, fmt.Errorf("open store %s: %w (pass --db with a file that belay demo or belay serve wrote)", path, err)
	case errors.Is(err, store.ErrSchemaTooNew):
		return nil, fmt.Errorf("open store %s: %w (upgrade belay)", path, err)
	default:
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
}

// openExistingStore opens a store that must already exist. Commands that
// only read use it, so a mistyped --db is an error instead of a new, empty
// database.
func openExistingStore(ctx context.Context, path string) (*sqlite.Store, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("open store %s: no such file (run belay demo to create one, or pass --db PATH or set BELAY_DB)", path)
	} else if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return openStore(ctx, path)
}

// getRun reads a run of any tenant and turns a missing run into an error
// that says how to find the right id.
func getRun(ctx context.Context, s store.Store, db, id string) (store.Run, error) {
	run, err := s.GetRun(ctx, "", id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Run{}, fmt.Errorf("run %s not found in %s (list runs with: belay runs --db %s)", id, db, db)
	}
	if err != nil {
		return store.Run{}, fmt.Errorf("read run %s: %w", id, err)
	}
	return run, nil
}
