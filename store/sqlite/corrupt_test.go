package sqlite

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
	"github.com/belayrun/belay/store/sqlite/sqlitetest"
)

// damagedStore returns a store whose file has rows and whose b-tree name
// has its interior pages overwritten: it opens as a sound file does.
func damagedStore(t *testing.T, name string) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "belay.db")
	s, err := Open(t.Context(), path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	sqlitetest.CreateRuns(t, s, 300)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	sqlitetest.DamageInterior(t, path, name)
	s, err = Open(t.Context(), path, Config{})
	if err != nil {
		t.Fatalf("open a file with damaged interior pages: %v (it opens: SQLite reads only the first page to open it)", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := health(t, s); err != nil {
		t.Fatalf("health before any statement met the damage: %v", err)
	}
	return s, path
}

// health is the store's Health, through the interface the server and the
// metrics use.
func health(t *testing.T, s store.Store) error {
	t.Helper()
	hc, ok := s.(store.HealthChecker)
	if !ok {
		t.Fatal("the SQLite store is not a store.HealthChecker")
	}
	return hc.Health(t.Context())
}

// fileDigest is a hash of the database file and of its write-ahead log,
// where a commit would land first.
func fileDigest(t *testing.T, path string) [32]byte {
	t.Helper()
	h := sha256.New()
	for _, p := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		h.Write(b)
		h.Write([]byte{0})
	}
	return [32]byte(h.Sum(nil))
}

// checkCorrupt fails unless err is the store's corruption error, saying
// what to do.
func checkCorrupt(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrCorrupt) {
		t.Errorf("%s: %v, want store.ErrCorrupt", what, err)
		return
	}
	for _, want := range []string{"belay check", "belay backup", "stop every belay process"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %q does not say %q", what, err, want)
		}
	}
}

// otherWrites are writes that touch none of the damaged pages: they must
// be refused all the same.
func otherWrites(s *Store) map[string]func(ctx context.Context) error {
	return map[string]func(ctx context.Context) error{
		"SetKillSwitch": func(ctx context.Context) error {
			return s.SetKillSwitch(ctx, store.KillSwitchParams{Engaged: true, Reason: "test", Now: time.Now()})
		},
		"CreateAPIKey": func(ctx context.Context) error {
			return s.CreateAPIKey(ctx, store.APIKey{ID: "k1", Tenant: "t", Name: "ops", SecretHash: "h", Roles: []store.Role{store.RoleAdmin}, CreatedAt: time.Now()})
		},
		"ExpireApprovals": func(ctx context.Context) error {
			_, err := s.ExpireApprovals(ctx, time.Now())
			return err
		},
	}
}

// A write that reaches a damaged page fails with store.ErrCorrupt; from
// then on every write is refused before it reaches the file, reads that
// need no damaged page go on, and Close returns.
func TestDamagedPageStopsWrites(t *testing.T) {
	t.Parallel()
	s, path := damagedStore(t, "runs")
	ctx := t.Context()
	before := fileDigest(t, path)

	_, _, err := s.CreateRun(ctx, store.CreateRunParams{ID: "new", Tenant: "t", Agent: "a", Now: time.Now()})
	checkCorrupt(t, "CreateRun on a damaged runs table", err)
	checkCorrupt(t, "Health after the write that met the damage", health(t, s))

	commits := s.WriterStats().Commits
	for name, write := range otherWrites(s) {
		checkCorrupt(t, name+" after the damage was found", write(ctx))
	}
	// Many at once: the writer answers each and neither dies nor spins.
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			checkCorrupt(t, "concurrent SetKillSwitch", otherWrites(s)["SetKillSwitch"](ctx))
		})
	}
	wg.Wait()
	if got := s.WriterStats().Commits; got != commits {
		t.Errorf("%d commits after the damage was found, want none", got-commits)
	}
	if after := fileDigest(t, path); after != before {
		t.Error("the damaged file changed after the store found the damage")
	}

	// The kill switch and the counts live on sound pages.
	if engaged, _, err := s.KillSwitch(ctx, ""); err != nil || engaged {
		t.Errorf("KillSwitch on a damaged store: engaged %v, %v; want the switch as it was", engaged, err)
	}
	if c, err := s.Counts(ctx); err != nil || c.Runs[store.StatusQueued] != 300 {
		t.Errorf("Counts on a damaged store: %+v, %v; want the 300 queued runs (read from an index)", c, err)
	}

	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := otherWrites(s)["SetKillSwitch"](ctx); !errors.Is(err, store.ErrCorrupt) && !errors.Is(err, ErrClosed) {
		t.Errorf("write after Close: %v", err)
	}
}

// A read that meets a damaged page stops the writer too, although the
// writes that follow touch only sound pages.
func TestDamageFoundByReadStopsWrites(t *testing.T) {
	t.Parallel()
	s, path := damagedStore(t, "journal")
	ctx := t.Context()
	before := fileDigest(t, path)

	_, err := s.Events(ctx, "run-00007")
	checkCorrupt(t, "Events on a damaged journal", err)
	checkCorrupt(t, "Health after the read that met the damage", health(t, s))
	for name, write := range otherWrites(s) {
		checkCorrupt(t, name+" after a read found the damage", write(ctx))
	}
	if after := fileDigest(t, path); after != before {
		t.Error("the damaged file changed after the store found the damage")
	}
	if _, err := s.GetRun(ctx, "t", "run-00007"); err != nil {
		t.Errorf("GetRun reads the sound runs table: %v", err)
	}
}

// Every request of the batch in which the damage is found fails with the
// corruption error, and none of them is committed: not those before the
// one that met the damage, nor those after.
func TestDamageFailsTheWholeBatch(t *testing.T) {
	t.Parallel()
	s, _ := damagedStore(t, "runs")
	ctx := t.Context()
	setSwitch := func(tenant string) *request {
		return &request{ctx: ctx, fn: func(ctx context.Context, tx *writeTx) error {
			_, err := tx.ExecContext(ctx, killSwitchSetSQL, sql.Named("tenant", tenant), sql.Named("engaged", true),
				sql.Named("reason", "test"), sql.Named("now", sqlrow.Nanos(t0)))
			return err
		}}
	}
	insertRun := &request{ctx: ctx, fn: func(ctx context.Context, tx *writeTx) error {
		_, err := tx.ExecContext(ctx, runInsertSQL,
			sql.Named("id", "new"), sql.Named("tenant", "t"), sql.Named("user", ""),
			sql.Named("client_request_id", ""), sql.Named("agent", "a"), sql.Named("agent_version", ""),
			sql.Named("input", ""), sql.Named("dry_run", false), sql.Named("requested_by", ""), sql.Named("budget", nil), sql.Named("sensitive", []byte("{}")),
			sql.Named("concurrency_key", ""), sql.Named("concurrency_limit", 0), sql.Named("priority", 0), sql.Named("not_before", int64(0)), sql.Named("now", sqlrow.Nanos(t0)))
		return err
	}}
	lost := &request{ctx: ctx, fn: func(ctx context.Context, tx *writeTx) error { return store.ErrLeaseLost }}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	skipped := setSwitch("skipped")
	skipped.ctx = canceled

	// The writer goroutine is idle, waiting for requests, so the batch can
	// be run here.
	batch := []*request{setSwitch("a"), lost, skipped, insertRun, setSwitch("b")}
	errs := make([]error, len(batch))
	s.writer.commit(batch, errs)
	for i, err := range errs {
		if i == 2 {
			if !errors.Is(err, context.Canceled) {
				t.Errorf("request whose caller gave up: %v, want context.Canceled", err)
			}
			continue
		}
		checkCorrupt(t, "request of the batch that met the damage", err)
	}
	for _, tenant := range []string{"a", "b"} {
		if engaged, _, err := s.KillSwitch(ctx, tenant); err != nil || engaged {
			t.Errorf("kill switch %s of the failed batch: engaged %v, %v; want nothing committed", tenant, engaged, err)
		}
	}
}

// An intact store reports itself healthy, through writes and reads.
func TestHealthOfIntactStore(t *testing.T) {
	t.Parallel()
	s := openTest(t, filepath.Join(t.TempDir(), "belay.db"))
	sqlitetest.CreateRuns(t, s, 10)
	if _, err := s.Events(t.Context(), "run-00003"); err != nil {
		t.Fatal(err)
	}
	if err := health(t, s); err != nil {
		t.Errorf("Health of an intact store: %v", err)
	}
}

// The schema is read at open: a file whose schema pages are damaged is
// refused there, and left as it is.
func TestOpenDamagedSchema(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "belay.db")
	s, err := Open(t.Context(), path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	sqlitetest.DamageLeaves(t, path, "sqlite_schema")
	before := fileDigest(t, path)
	s, err = Open(t.Context(), path, Config{})
	if err == nil {
		s.Close()
		t.Fatal("Open of a file whose schema is damaged: no error")
	}
	for _, want := range []string{path, "corrupt", "move it aside"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if after := fileDigest(t, path); after != before {
		t.Error("Open changed a file it refused")
	}
}
