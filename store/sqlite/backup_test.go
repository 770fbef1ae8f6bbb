package sqlite

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/belayrun/belay/store"
)

func TestBackup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openTest(t, filepath.Join(dir, "belay.db"))
	create := func(i int) error {
		_, _, err := s.CreateRun(t.Context(), store.CreateRunParams{
			ID: fmt.Sprintf("run-%04d", i), Tenant: "t", User: "u", Agent: "a", Now: t0,
			Events: []store.Event{{Type: "created", Time: t0, Data: []byte(fmt.Sprintf(`{"i":%d}`, i))}},
		})
		return err
	}
	for i := range 20 {
		if err := create(i); err != nil {
			t.Fatal(err)
		}
	}

	// Runs go on being created while the backup is taken; the backup holds
	// a whole number of them, each with its event.
	var (
		wg      sync.WaitGroup
		stop    = make(chan struct{})
		created = 20
	)
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := create(created); err != nil {
				t.Error(err)
				return
			}
			created++
		}
	})
	backup := filepath.Join(dir, "backup.db")
	err := s.Backup(t.Context(), backup)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}

	b := openTest(t, backup)
	runs, err := b.ListRuns(t.Context(), store.ListRunsParams{Tenant: "t", Limit: 100000})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) < 20 || len(runs) > created {
		t.Fatalf("backup holds %d runs; want from 20 to the %d created", len(runs), created)
	}
	for i, r := range runs {
		if want := fmt.Sprintf("run-%04d", i); r.ID != want {
			t.Fatalf("run %d of the backup is %s, want %s: the backup is not a prefix of the runs", i, r.ID, want)
		}
		es, err := b.Events(t.Context(), r.ID)
		if err != nil || len(es) != 1 || !bytes.Equal(es[0].Data, []byte(fmt.Sprintf(`{"i":%d}`, i))) {
			t.Errorf("events of %s in the backup: %+v, %v", r.ID, es, err)
		}
	}
	t.Logf("backup holds %d of %d runs", len(runs), created)
}

func TestBackupNeverOverwrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openTest(t, filepath.Join(dir, "belay.db"))
	existing := filepath.Join(dir, "precious")
	if err := os.WriteFile(existing, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Backup(t.Context(), existing); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Backup onto an existing file: %v, want fs.ErrExist", err)
	}
	if b, err := os.ReadFile(existing); err != nil || string(b) != "keep me" {
		t.Errorf("existing file after a refused backup: %q, %v", b, err)
	}
	if err := s.Backup(t.Context(), filepath.Join(dir, "no-such-dir", "backup.db")); err == nil {
		t.Error("Backup into a missing directory: no error")
	}
}

// TestBackupNameIsAFileName backs up to a name SQLite would read as a URI:
// the backup is the file of that name, and the file the URI names is left
// alone.
func TestBackupNameIsAFileName(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, filepath.Join(dir, "belay.db"))
	t.Chdir(dir)
	if err := os.WriteFile("precious.db", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Backup(t.Context(), "file:precious.db"); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat("precious.db"); err != nil || info.Size() != 0 {
		t.Errorf("precious.db after a backup to file:precious.db: %v, %v; want it empty", info, err)
	}
	b := openTest(t, filepath.Join(dir, "file:precious.db"))
	if _, err := b.ListRuns(t.Context(), store.ListRunsParams{}); err != nil {
		t.Errorf("the backup does not open as a store: %v", err)
	}
}
