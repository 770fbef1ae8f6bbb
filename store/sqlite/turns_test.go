package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/store"
)

// TestWritersTakeTurns has one store write one file flat out while another
// store of the same file makes its writes. With SQLite's own busy handler
// one of them starved: while one made 320 writes the other made 16, or
// 13,852, and one write in a hundred waited more than a second. Taking
// turns, each makes writes in proportion to its writers (16 to 8 here).
func TestWritersTakeTurns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	busy, polite := openTest(t, path), openTest(t, path)
	create := func(s *Store, id string) error {
		_, _, err := s.CreateRun(t.Context(), store.CreateRunParams{ID: id, Tenant: "t", Agent: "a", Now: t0})
		return err
	}

	var (
		stop     = make(chan struct{})
		busyDone atomic.Int64
		busyErr  atomic.Value
		flatOut  sync.WaitGroup
	)
	for g := range 16 {
		flatOut.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := create(busy, fmt.Sprintf("busy-%02d-%d", g, i)); err != nil {
					busyErr.Store(err)
					return
				}
				busyDone.Add(1)
			}
		})
	}
	defer flatOut.Wait()
	defer close(stop)
	testrun.WaitFor(t, "the first store to write", func() bool { return busyDone.Load() >= 50 })

	const each, writers = 40, 8
	var (
		mine sync.WaitGroup
		errs = make([]error, writers)
	)
	before := busyDone.Load()
	for g := range writers {
		mine.Go(func() {
			for i := range each {
				if err := create(polite, fmt.Sprintf("polite-%d-%02d", g, i)); err != nil {
					errs[g] = err
					return
				}
			}
		})
	}
	mine.Wait()
	meanwhile := busyDone.Load() - before

	if err := errors.Join(errs...); err != nil {
		t.Errorf("writes of the second store while the first wrote flat out: %v", err)
	}
	if err, _ := busyErr.Load().(error); err != nil {
		t.Errorf("writes of the first store: %v", err)
	}
	// Twice as many writers should make about twice as many writes; a
	// factor of ten either way is starvation.
	const total = each * writers
	if meanwhile < total/10 || meanwhile > total*10 {
		t.Errorf("while the second store made %d writes the first made %d: one starved the other", total, meanwhile)
	}
	if waits := busy.WriterStats().LockWaits + polite.WriterStats().LockWaits; waits == 0 {
		t.Error("no transaction counted a wait for the other store's lock")
	}
	t.Logf("while the second store made %d writes the first made %d", total, meanwhile)
}

// TestCloseWhileWaitingForTheLock closes a store whose writer waits for the
// write lock another connection holds: Close returns at once, not after
// the busy timeout (an hour here), and the write fails with ErrClosed.
func TestCloseWhileWaitingForTheLock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "belay.db")
	s, err := Open(t.Context(), path, Config{BusyTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	holder, err := sql.Open("sqlite", writerDSN(path, Config{}.withDefaults()))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	lock, err := holder.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := lock.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	defer lock.ExecContext(t.Context(), "ROLLBACK")

	// Handing the request over by hand makes sure the writer has taken
	// it, and is waiting for the lock, before Close.
	r := &request{ctx: t.Context(), fn: func(context.Context, *writeTx) error { return nil }, err: make(chan error, 1)}
	s.writer.requests <- r
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := <-r.err; !errors.Is(err, ErrClosed) {
		t.Errorf("write waiting for the lock at Close: %v, want ErrClosed", err)
	}
}

// TestWriterStopsAfterANewerMigration has another process migrate the file
// past this binary's schema while a store is open on it: the store's
// writes fail with ErrSchemaTooNew, from then on, and write nothing.
func TestWriterStopsAfterANewerMigration(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "belay.db")
	s := openTest(t, path)
	if _, _, err := s.CreateRun(t.Context(), store.CreateRunParams{ID: "before", Tenant: "t", Agent: "a", Now: t0}); err != nil {
		t.Fatal(err)
	}
	newer, err := sql.Open("sqlite", writerDSN(path, Config{}.withDefaults()))
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close()
	if _, err := newer.Exec(fmt.Sprintf("PRAGMA user_version = %d", len(mustMigrations(t))+1)); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"after", "again"} {
		_, _, err := s.CreateRun(t.Context(), store.CreateRunParams{ID: id, Tenant: "t", Agent: "a", Now: t0})
		if !errors.Is(err, store.ErrSchemaTooNew) {
			t.Errorf("CreateRun %s after a newer migration: %v, want ErrSchemaTooNew", id, err)
		}
	}
	runs, err := s.ListRuns(t.Context(), store.ListRunsParams{Tenant: "t"})
	if err != nil || len(runs) != 1 {
		t.Errorf("runs after the refused writes: %v, %v; want only the first", ids(runs), err)
	}
}

// TestOpenWaitsForAMigration opens a file of an older schema while another
// process holds its write lock, as one migrating a large file does, for ten
// times BusyTimeout: opening waits for it instead of failing with "database
// is locked".
func TestOpenWaitsForAMigration(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "belay.db")
	db, err := sql.Open("sqlite", writerDSN(path, Config{}.withDefaults()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms := mustMigrations(t)
	if err := migrate(t.Context(), db, path, ms[:len(ms)-1]); err != nil {
		t.Fatal(err)
	}
	migrating, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrating.ExecContext(t.Context(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}

	const busy = 10 * time.Millisecond
	opened := make(chan error, 1)
	go func() {
		s, err := Open(t.Context(), path, Config{BusyTimeout: busy})
		if err == nil {
			err = s.Close()
		}
		opened <- err
	}()
	// The fault: the lock is held well past the open's BusyTimeout.
	hold := time.NewTimer(10 * busy)
	select {
	case err := <-opened:
		t.Fatalf("Open returned while another process held the write lock: %v", err)
	case <-hold.C:
	}
	if _, err := migrating.ExecContext(t.Context(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	migrating.Close()
	if err := <-opened; err != nil {
		t.Errorf("Open after waiting for the other process: %v", err)
	}
}

// A store's first write checks the schema too: another process may have
// migrated the file between this store's Open and that write.
func TestFirstWriteAfterANewerMigration(t *testing.T) {
	path := filepath.Join(t.TempDir(), "belay.db")
	s := openTest(t, path)
	newer, err := sql.Open("sqlite", writerDSN(path, Config{}.withDefaults()))
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Close()
	if _, err := newer.Exec(fmt.Sprintf("PRAGMA user_version = %d", len(mustMigrations(t))+1)); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.CreateRun(t.Context(), store.CreateRunParams{ID: "first", Tenant: "t", Agent: "a", Now: t0})
	if !errors.Is(err, store.ErrSchemaTooNew) {
		t.Errorf("first CreateRun after a newer migration: %v, want ErrSchemaTooNew", err)
	}
}
