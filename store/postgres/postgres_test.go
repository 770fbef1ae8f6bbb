package postgres

import (
	"context"
	"crypto/rand"
	"embed"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/storetest"
)

// The tests need a PostgreSQL server: BELAY_TEST_DATABASE_URL, else the
// local one. Each test store gets a schema of its own, named after the
// package's prefix, dropped when the test ends.
const defaultTestURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var testDB struct {
	url    string
	prefix string
	// err says why no server answered; the tests then fail under CI and
	// are skipped elsewhere.
	err   error
	admin *pgxpool.Pool

	schemas atomic.Int64

	mu      sync.Mutex
	skipped []string
}

func TestMain(m *testing.M) {
	testDB.url = os.Getenv("BELAY_TEST_DATABASE_URL")
	if testDB.url == "" {
		testDB.url = defaultTestURL
	}
	testDB.prefix = "belay_test_" + strings.ToLower(rand.Text()[:10])
	testDB.admin, testDB.err = connectAdmin(testDB.url)
	if testDB.err != nil {
		fmt.Fprintf(os.Stderr, "\n%s\n\n", noDatabase())
	}

	code := m.Run()

	if testDB.admin != nil {
		if err := dropSchemas(testDB.admin, testDB.prefix+"%"); err != nil {
			fmt.Fprintf(os.Stderr, "drop test schemas: %v\n", err)
			code = 1
		}
		testDB.admin.Close()
	}
	if len(testDB.skipped) > 0 {
		fmt.Fprintf(os.Stderr, "\n%s\nSKIPPED: %s\n\n", noDatabase(), strings.Join(testDB.skipped, ", "))
	}
	os.Exit(testrun.Exit(code))
}

func noDatabase() string {
	return fmt.Sprintf("!!! NO POSTGRESQL for store/postgres: %v\n"+
		"!!! Every test of this package needs one: set BELAY_TEST_DATABASE_URL or start the server at %s.",
		testDB.err, defaultTestURL)
}

func connectAdmin(url string) (*pgxpool.Pool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, err
	}
	pc.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// needDB fails the test under CI and skips it elsewhere when no server
// answered.
func needDB(t testing.TB) {
	t.Helper()
	if testDB.err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and no PostgreSQL answered: %v (set BELAY_TEST_DATABASE_URL)", testDB.err)
	}
	testDB.mu.Lock()
	testDB.skipped = append(testDB.skipped, t.Name())
	testDB.mu.Unlock()
	t.Skipf("SKIPPED: no PostgreSQL answered at %s: %v (set BELAY_TEST_DATABASE_URL)", testDB.url, testDB.err)
}

// newSchema returns the name of a schema no other test uses, dropped when
// the test ends.
func newSchema(t testing.TB) string {
	t.Helper()
	needDB(t)
	name := fmt.Sprintf("%s_%d", testDB.prefix, testDB.schemas.Add(1))
	t.Cleanup(func() {
		if err := dropSchemas(testDB.admin, name); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// dropSchemas drops the schemas whose names are LIKE pattern.
func dropSchemas(pool *pgxpool.Pool, pattern string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := pool.Query(ctx, "SELECT nspname FROM pg_namespace WHERE nspname LIKE $1", pattern)
	if err != nil {
		return err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, name := range names {
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			return err
		}
	}
	return nil
}

// openTest opens a store in a new schema, closed when the test ends.
func openTest(t testing.TB, cfg Config) *Store {
	t.Helper()
	if cfg.Schema == "" {
		cfg.Schema = newSchema(t)
	}
	s, err := Open(t.Context(), testDB.url, cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	// Registered after newSchema's cleanup, so it runs before it.
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

//go:embed query/*.sql
var queryFiles embed.FS

// TestQueries checks the queries the shared scanners read (see
// storetest.Queries).
func TestQueries(t *testing.T) {
	storetest.Queries(t, queryFiles)
}

func TestConformance(t *testing.T) {
	needDB(t)
	storetest.Run(t, func(t *testing.T) store.Store {
		// Small pools: the cases run in parallel, each with a store of its
		// own, and the server's connections are few (100 by default).
		return openTest(t, Config{MaxConns: 3})
	})
}

func TestAccessConformance(t *testing.T) {
	needDB(t)
	storetest.RunAccess(t, func(t *testing.T) store.AccessStore {
		return openTest(t, Config{MaxConns: 3})
	})
}

func TestConfig(t *testing.T) {
	t.Parallel()
	if got := (Config{}).withDefaults(); got.Schema != "belay" || got.AppRole != "belay_app" || got.MaxConns != 0 {
		t.Errorf("defaults %+v", got)
	}
	for _, cfg := range []Config{
		{Schema: strings.Repeat("s", 64)},
		{AppRole: "a\x00b"},
		{MaxConns: -1},
	} {
		if _, err := Open(t.Context(), "postgres://127.0.0.1:1/none", cfg); err == nil || !strings.Contains(err.Error(), "want") {
			t.Errorf("Open with %+v: %v, want a validation error", cfg, err)
		}
	}
}

var t0 = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

// claimOne creates a run and claims one due run, which is that run unless
// other goroutines are doing the same.
func claimOne(t testing.TB, s *Store, id string) store.Run {
	t.Helper()
	ctx := t.Context()
	if _, _, err := s.CreateRun(ctx, store.CreateRunParams{ID: id, Tenant: "t", Agent: "a", Now: t0}); err != nil {
		t.Fatal(err)
	}
	runs, err := s.ClaimRuns(ctx, store.ClaimRunsParams{Owner: id, Now: t0, TTL: time.Hour, Limit: 1})
	if err != nil || len(runs) != 1 {
		t.Fatalf("claim: %v, %v", ids(runs), err)
	}
	return runs[0]
}

func ids(runs []store.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

// Eight workers claim while eight others create runs: every run is claimed
// exactly once, at epoch 1.
func TestClaimSkipLocked(t *testing.T) {
	t.Parallel()
	s := openTest(t, Config{MaxConns: 8})
	const workers, perWorker = 8, 200
	ctx := t.Context()

	var (
		created sync.WaitGroup
		claimed = make([][]string, workers)
		done    atomic.Bool
	)
	for w := range workers {
		created.Go(func() {
			for i := range perWorker {
				id := fmt.Sprintf("run-%d-%03d", w, i)
				if _, _, err := s.CreateRun(ctx, store.CreateRunParams{ID: id, Tenant: fmt.Sprintf("t%d", i%3), Agent: "a", Now: t0}); err != nil {
					t.Errorf("CreateRun: %v", err)
					return
				}
			}
		})
	}
	var claiming sync.WaitGroup
	for w := range workers {
		claiming.Go(func() {
			for {
				// Read before claiming: a claim that finds nothing after
				// creation ended means nothing is left.
				last := done.Load()
				runs, err := s.ClaimRuns(ctx, store.ClaimRunsParams{Owner: fmt.Sprintf("w%d", w), Now: t0, TTL: time.Hour, Limit: 5})
				if err != nil {
					t.Errorf("ClaimRuns: %v", err)
					return
				}
				claimed[w] = append(claimed[w], ids(runs)...)
				if len(runs) == 0 && last {
					return
				}
			}
		})
	}
	created.Wait()
	done.Store(true)
	claiming.Wait()

	var all []string
	for w, c := range claimed {
		all = append(all, c...)
		t.Logf("worker %d claimed %d runs", w, len(c))
	}
	slices.Sort(all)
	if len(all) != workers*perWorker || len(slices.Compact(slices.Clone(all))) != len(all) {
		t.Errorf("claimed %d runs, %d distinct; want each of %d exactly once", len(all), len(slices.Compact(slices.Clone(all))), workers*perWorker)
	}
	runs, err := s.ListRuns(ctx, store.ListRunsParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.LeaseEpoch != 1 || r.Status != store.StatusRunning {
			t.Errorf("run %s: epoch %d, status %s; want 1, running", r.ID, r.LeaseEpoch, r.Status)
		}
	}
}

// Requests of one (tenant, user, client request id) arriving at once create
// one run; a retry under the same run id finds it too.
func TestCreateRunAtOnce(t *testing.T) {
	t.Parallel()
	s := openTest(t, Config{MaxConns: 4})
	const requests = 8
	var (
		wg      sync.WaitGroup
		created atomic.Int32
		got     = make([]string, requests)
	)
	for i := range requests {
		wg.Go(func() {
			r, ok, err := s.CreateRun(t.Context(), store.CreateRunParams{ID: fmt.Sprintf("run-%d", i), Tenant: "t", User: "u",
				ClientRequestID: "req-1", Agent: "a", Now: t0, Events: []store.Event{{Type: "run_created", Time: t0}}})
			if err != nil {
				t.Errorf("CreateRun: %v", err)
				return
			}
			if ok {
				created.Add(1)
			}
			got[i] = r.ID
		})
	}
	wg.Wait()
	if created.Load() != 1 || len(slices.Compact(slices.Clone(got))) != 1 {
		t.Fatalf("%d created, runs returned %v; want one run for all", created.Load(), got)
	}
	again, ok, err := s.CreateRun(t.Context(), store.CreateRunParams{ID: got[0], Tenant: "t", User: "u", ClientRequestID: "req-1", Agent: "a", Now: t0})
	if err != nil || ok || again.ID != got[0] {
		t.Errorf("retry under the same id: %s, created %v, %v", again.ID, ok, err)
	}
	if evs, err := s.Events(t.Context(), got[0]); err != nil || len(evs) != 1 {
		t.Errorf("events of the run: %d, %v; want 1", len(evs), err)
	}
}

func TestSize(t *testing.T) {
	needDB(t)
	t.Parallel()
	s := openTest(t, Config{MaxConns: 2})
	other := openTest(t, Config{MaxConns: 2})
	empty, err := s.Size(t.Context())
	if err != nil || empty <= 0 {
		t.Fatalf("Size of a new schema: %d, %v; want its empty tables' bytes", empty, err)
	}
	for i := range 50 {
		// Random, so that TOAST cannot compress it away.
		noise := make([]byte, 1400)
		_, _ = rand.Read(noise)
		input := fmt.Sprintf("%x", noise)
		if _, _, err := s.CreateRun(t.Context(), store.CreateRunParams{ID: fmt.Sprintf("r-%d", i), Tenant: "t", Agent: "a",
			Input: input, Now: time.Unix(1, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	full, err := s.Size(t.Context())
	if err != nil || full < empty+50*2800 {
		t.Errorf("Size after 50 runs of 2,800 bytes: %d (was %d), %v", full, empty, err)
	}
	// Another schema's rows are not counted.
	if n, err := other.Size(t.Context()); err != nil || n != empty {
		t.Errorf("Size of another new schema: %d, %v; want %d", n, err, empty)
	}
}
