package postgres

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/store"
)

// Processes opening a new schema at once: one migrates, the others wait for
// it and find the work done.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	const opens = 4
	var (
		wg     sync.WaitGroup
		stores = make([]*Store, opens)
		errs   = make([]error, opens)
	)
	for i := range opens {
		wg.Go(func() {
			stores[i], errs[i] = Open(t.Context(), testDB.url, Config{Schema: schema, MaxConns: 2})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
			continue
		}
		defer stores[i].Close()
	}
	if t.Failed() {
		return
	}

	rows, err := testDB.admin.Query(t.Context(),
		"SELECT version FROM "+pgx.Identifier{schema, "belay_schema_version"}.Sanitize()+" ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, m := range ms {
		want = append(want, m.Version)
	}
	if !slices.Equal(versions, want) {
		t.Errorf("versions applied %v, want %v, once each", versions, want)
	}

	// Every store works on the one schema.
	for i, s := range stores {
		r := claimOne(t, s, "run-"+string(rune('a'+i)))
		if r.LeaseEpoch != 1 {
			t.Errorf("store %d claimed at epoch %d", i, r.LeaseEpoch)
		}
	}
}

func TestSchemaTooNew(t *testing.T) {
	t.Parallel()
	s := openTest(t, Config{})
	if _, err := s.pool.Exec(t.Context(), "INSERT INTO belay_schema_version (version, name) VALUES (99, '099_future.up.sql')"); err != nil {
		t.Fatal(err)
	}
	again, err := Open(t.Context(), testDB.url, Config{Schema: s.schema})
	if err == nil {
		again.Close()
		t.Fatal("Open of a newer schema: no error")
	}
	if !errors.Is(err, store.ErrSchemaTooNew) {
		t.Errorf("Open of a newer schema: %v, want ErrSchemaTooNew", err)
	}
	ms, _ := migrations()
	for _, want := range []string{"schema 99", "knows " + strconv.Itoa(len(ms)), "upgrade belay", s.schema} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestNotBelay(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	for _, q := range []string{
		"CREATE SCHEMA " + pgx.Identifier{schema}.Sanitize(),
		"CREATE TABLE " + pgx.Identifier{schema, "orders"}.Sanitize() + " (id int)",
	} {
		if _, err := testDB.admin.Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(t.Context(), testDB.url, Config{Schema: schema})
	if err == nil {
		s.Close()
		t.Fatal("Open of another application's schema: no error")
	}
	if !errors.Is(err, store.ErrNotBelay) {
		t.Errorf("Open of another application's schema: %v, want ErrNotBelay", err)
	}
	var tables int
	if err := testDB.admin.QueryRow(t.Context(), "SELECT count(*) FROM pg_tables WHERE schemaname = $1", schema).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 1 {
		t.Errorf("Open changed the schema: %d tables, want 1", tables)
	}
}

// Reopening a schema at the latest version changes nothing and works.
func TestReopen(t *testing.T) {
	t.Parallel()
	s := openTest(t, Config{})
	claimOne(t, s, "run-1")
	again := openTest(t, Config{Schema: s.schema})
	if r, err := again.GetRun(t.Context(), "t", "run-1"); err != nil || r.LeaseEpoch != 1 {
		t.Errorf("GetRun after reopening: %+v, %v", r, err)
	}
}
