package sqlite

import (
	"bytes"
	"crypto/rand"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/migration"
	"github.com/belayrun/belay/store/storetest"
)

func TestMain(m *testing.M) { testrun.Main(m) }

//go:embed query/*.sql
var queryFiles embed.FS

// TestQueries checks the queries the shared scanners read (see
// storetest.Queries).
func TestQueries(t *testing.T) {
	storetest.Queries(t, queryFiles)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return openTest(t, filepath.Join(t.TempDir(), "belay.db"))
	})
}

func TestAccessConformance(t *testing.T) {
	storetest.RunAccess(t, func(t *testing.T) store.AccessStore {
		return openTest(t, filepath.Join(t.TempDir(), "belay.db"))
	})
}

func openTest(t testing.TB, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path, Config{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// checkUnchanged fails if Open changed the file.
func checkUnchanged(t *testing.T, path string, want []byte) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Open changed %s", path)
	}
}

func TestOpenCorrupt(t *testing.T) {
	t.Parallel()
	for _, size := range []int{1, 100, 8192} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "belay.db")
			junk := make([]byte, size)
			rand.Read(junk)
			if err := os.WriteFile(path, junk, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(t.Context(), path, Config{})
			if err == nil {
				s.Close()
				t.Fatal("Open of random bytes: no error")
			}
			for _, want := range []string{path, "is not a SQLite database", "move it aside"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			checkUnchanged(t, path, junk)
		})
	}
}

func TestOpenForeign(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('hello')"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	s, err := Open(t.Context(), path, Config{})
	if err == nil {
		s.Close()
		t.Fatal("Open of another application's database: no error")
	}
	if !errors.Is(err, store.ErrNotBelay) || !strings.Contains(err.Error(), path) {
		t.Errorf("Open: %v, want ErrNotBelay naming the file", err)
	}
	checkUnchanged(t, path, before)
}

func TestOpenSchemaTooNew(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "belay.db")
	s, err := Open(t.Context(), path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("PRAGMA user_version = 999"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(t.Context(), path, Config{})
	if err == nil {
		s.Close()
		t.Fatal("Open of a newer schema: no error")
	}
	if !errors.Is(err, store.ErrSchemaTooNew) {
		t.Errorf("Open: %v, want ErrSchemaTooNew", err)
	}
	known := fmt.Sprintf("this binary knows %d", len(mustMigrations(t)))
	for _, want := range []string{"schema 999", known, "upgrade belay"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestReopen(t *testing.T) {
	t.Parallel()
	// A space and a '?' must stay part of the file name.
	path := filepath.Join(t.TempDir(), "my belay?.db")
	s, err := Open(t.Context(), path, Config{})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := s.CreateRun(t.Context(), store.CreateRunParams{ID: "r1", Tenant: "t", Agent: "a", Now: time.Unix(1, 2)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database not at its path: %v", err)
	}

	s = openTest(t, path)
	got, err := s.GetRun(t.Context(), "t", "r1")
	if err != nil {
		t.Fatalf("GetRun after reopen: %v", err)
	}
	if got.ID != run.ID || !got.CreatedAt.Equal(run.CreatedAt) {
		t.Errorf("run after reopen: %+v, want %+v", got, run)
	}
}

// TestMigrateKeepsRows opens a database of schema 3 with a run, an approval
// and an undelivered outbox message, as an older belay left it.
func TestMigrateKeepsRows(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "belay.db")
	db, err := sql.Open("sqlite", writerDSN(path, Config{}.withDefaults()))
	if err != nil {
		t.Fatal(err)
	}
	if err := migrate(t.Context(), db, path, mustMigrations(t)[:3]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`
		INSERT INTO runs (id, tenant, user_id, client_request_id, agent, agent_version, input, dry_run, status, created_at, updated_at)
		VALUES ('r1', 't', 'u', '', 'a', '', '', 0, 'waiting_approval', 1, 1);
		INSERT INTO approvals (id, tenant, run_id, step, tool_use_id, tool, args, args_hash, reason, category, summary,
			policy_version, binding, status, expires_at, created_at)
		VALUES ('ap1', 't', 'r1', 1, 'toolu_1', 'reply', X'7B7D', 'h', 'r', 'c', 's', 'v', 'b', 'pending', 9, 1);
		INSERT INTO outbox (tenant, run_id, kind, payload, created_at) VALUES ('t', 'r1', 'escalation', X'7B7D', 1);
		INSERT INTO runs (id, tenant, user_id, client_request_id, agent, agent_version, input, dry_run, status, created_at, updated_at)
		VALUES ('r2', 't', 'u', '', 'a', '', '', 0, 'done', 2, 2);
		INSERT INTO messages (run_id, seq, step, role, content, created_at) VALUES
			('r2', 0, 0, 'user', X'5B5D', 3), ('r1', 0, 0, 'user', X'7B7D', 4), ('r2', 1, 1, 'assistant', X'2222', 5);
		INSERT INTO events (run_id, step, type, ts, data) VALUES
			('r1', 0, 'created', 6, X'7B7D'), ('r2', 0, 'created', 7, NULL), ('r2', 1, 'model_call', 8, X'5B315D');
	`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s := openTest(t, path)
	r, err := s.GetRun(t.Context(), "t", "r1")
	if err != nil || r.RequestedBy != "" {
		t.Errorf("run after migration: %+v, %v", r, err)
	}
	// Which of its arguments are secret was never recorded: not known.
	if r.Sensitive != nil {
		t.Errorf("a run older than migration 11 records sensitive fields %+v", r.Sensitive)
	}
	a, err := s.GetApproval(t.Context(), "t", "ap1")
	if err != nil || a.SelfApproval || a.Status != store.ApprovalPending {
		t.Errorf("approval after migration: %+v, %v", a, err)
	}
	// Messages and events kept their runs when migration 8 moved them to
	// the runs' refs.
	var got []string
	for _, id := range []string{"r1", "r2"} {
		ms, err := s.Messages(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			got = append(got, fmt.Sprintf("%s message %d %s %s %d", m.RunID, m.Seq, m.Role, m.Content, m.CreatedAt.UnixNano()))
		}
		es, err := s.Events(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			got = append(got, fmt.Sprintf("%s event %d %s %s %d", e.RunID, e.Step, e.Type, e.Data, e.Time.UnixNano()))
		}
	}
	want := []string{
		"r1 message 0 user {} 4", "r1 event 0 created {} 6",
		"r2 message 0 user [] 3", "r2 message 1 assistant \"\" 5",
		"r2 event 0 created  7", "r2 event 1 model_call [1] 8",
	}
	if !slices.Equal(got, want) {
		t.Errorf("after migration:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A run created after the migration takes the next ref, not one of
	// theirs.
	r3, _, err := s.CreateRun(t.Context(), store.CreateRunParams{ID: "r3", Tenant: "t", User: "u", Agent: "a", Now: t0,
		Events: []store.Event{{Type: "created", Time: t0}}})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]int{r3.ID: 1, "r2": 2, "r1": 1} {
		if es, err := s.Events(t.Context(), id); err != nil || len(es) != want {
			t.Errorf("events of %s: %d, %v; want %d", id, len(es), err, want)
		}
	}

	// An older belay still running on the file creates runs as it always
	// did, without a ref: they get one, and the newer belay carries them on.
	older, err := sql.Open("sqlite", writerDSN(path, Config{}.withDefaults()))
	if err != nil {
		t.Fatal(err)
	}
	defer older.Close()
	if _, err := older.Exec(`
		INSERT INTO runs (id, tenant, user_id, client_request_id, agent, agent_version, input, dry_run, status, created_at, updated_at)
		VALUES ('r4', 't', 'u', '', 'a', '', '', 0, 'queued', 9, 9)`); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.ClaimRuns(t.Context(), store.ClaimRunsParams{Owner: "new", Now: t0, TTL: time.Hour, Limit: 1})
	if err != nil || len(claimed) != 1 || claimed[0].ID != "r4" {
		t.Fatalf("claim the older belay's run: %v, %v", ids(claimed), err)
	}
	if claimed[0].Sensitive != nil || r3.Sensitive == nil {
		t.Errorf("sensitive fields of the older belay's run %+v and of the newer's %+v; want unknown and recorded", claimed[0].Sensitive, r3.Sensitive)
	}
	if err := step(t.Context(), s, claimed[0], 0); err != nil {
		t.Errorf("a step of the older belay's run: %v", err)
	}
	if ms, err := s.Messages(t.Context(), "r4"); err != nil || len(ms) != 1 {
		t.Errorf("messages of the older belay's run: %d, %v; want 1", len(ms), err)
	}
	if ms, err := s.Messages(t.Context(), "r2"); err != nil || len(ms) != 2 {
		t.Errorf("messages of r2 after r4's step: %d, %v; want 2", len(ms), err)
	}

	ds, err := s.ClaimDeliveries(t.Context(), store.ClaimDeliveriesParams{Owner: "d", Now: t0, TTL: time.Minute, Limit: 10})
	if err != nil || len(ds) != 0 {
		t.Errorf("deliveries of a tenant without webhooks: %+v, %v", ds, err)
	}
}

func TestOpenConcurrentNewFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "belay.db")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { openTest(t, path) })
	}
	wg.Wait()
}

func TestConfig(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "belay.db")
	for _, cfg := range []Config{
		{Synchronous: "SOMETIMES"},
		{BusyTimeout: -time.Second},
		{MaxBatch: -1},
	} {
		if s, err := Open(t.Context(), path, cfg); err == nil {
			s.Close()
			t.Errorf("Open with %+v: no error", cfg)
		}
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("an invalid config created the file: %v", err)
	}
	s, err := Open(t.Context(), path, Config{Synchronous: "normal", MaxBatch: 1})
	if err != nil {
		t.Fatalf("Open with a valid config: %v", err)
	}
	s.Close()
}

func TestClosed(t *testing.T) {
	t.Parallel()
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "belay.db"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	_, _, err = s.CreateRun(t.Context(), store.CreateRunParams{ID: "r1"})
	if !errors.Is(err, ErrClosed) {
		t.Errorf("CreateRun after Close: %v, want ErrClosed", err)
	}
}

func mustMigrations(t *testing.T) []migration.File {
	t.Helper()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	return ms
}
