package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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

// A schema written before the journal (migration 11), with a run in the
// middle of its steps: its messages keep every byte, its events their order,
// and the run goes on, its next events numbered after them.
func TestMigrationMovesHistoryToTheJournal(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	ctx := t.Context()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	tx, err := testDB.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	ident := pgx.Identifier{schema}.Sanitize()
	for _, q := range []string{"CREATE SCHEMA " + ident, "SET LOCAL search_path TO " + ident, schemaVersionCreateSQL} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range ms[:10] {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			t.Fatalf("%s: %v", m.Name, err)
		}
		if _, err := tx.Exec(ctx, schemaVersionInsertSQL, namedArgs{"version": m.Version, "name": m.Name}); err != nil {
			t.Fatal(err)
		}
	}
	spaced := "[ {\"type\" : \"tool_use\", \"id\":\"tu_1\"} ]\n"
	for _, q := range []string{`
		INSERT INTO runs (id, tenant, user_id, client_request_id, agent, agent_version, input, dry_run, status,
			message_count, lease_owner, lease_expires, lease_epoch, created_at, updated_at, changed_at)
		VALUES ('r1', 't1', 'u', '', 'a', 'v', 'hi', false, 'running', 2, 'w1', 9000000000000000000, 1, 1, 1, 1),
			('r2', 't2', 'u', '', 'a', 'v', 'hi', false, 'done', 1, '', 0, 1, 1, 1, 1)`, `
		INSERT INTO messages (tenant, run_id, seq, step, role, content, created_at) VALUES
			('t1', 'r1', 0, 0, 'user', convert_to('[{"type":"text","text":"h\u00e9llo"}]', 'UTF8'), 3),
			('t2', 'r2', 0, 0, 'user', convert_to('[]', 'UTF8'), 4),
			('t1', 'r1', 1, 1, 'assistant', convert_to(` + quoteLiteral(spaced) + `, 'UTF8'), 5)`, `
		INSERT INTO events (tenant, run_id, step, type, ts, data) VALUES
			('t1', 'r1', 0, 'run_created', 6, convert_to('{"agent":"a"}', 'UTF8')),
			('t2', 'r2', 0, 'run_created', 7, NULL),
			('t1', 'r1', 1, 'model_call', 8, convert_to('[1]', 'UTF8'))`} {
		if _, err := tx.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	s := openTest(t, Config{Schema: schema})
	var got []string
	for _, id := range []string{"r1", "r2"} {
		msgs, err := s.Messages(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			got = append(got, fmt.Sprintf("%s message %d step %d %s %q at %d", m.RunID, m.Seq, m.Step, m.Role, m.Content, m.CreatedAt.UnixNano()))
		}
		events, err := s.Events(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			got = append(got, fmt.Sprintf("%s event %d step %d %s %q at %d", e.RunID, e.Seq, e.Step, e.Type, e.Data, e.Time.UnixNano()))
		}
	}
	want := []string{
		`r1 message 0 step 0 user "[{\"type\":\"text\",\"text\":\"h\\u00e9llo\"}]" at 3`,
		fmt.Sprintf("r1 message 1 step 1 assistant %q at 5", spaced),
		`r1 event 1 step 0 run_created "{\"agent\":\"a\"}" at 6`,
		`r1 event 2 step 1 model_call "[1]" at 8`,
		`r2 message 0 step 0 user "[]" at 4`,
		`r2 event 1 step 0 run_created "" at 7`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("after migration:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The run goes on under its lease: its history is appended to, never
	// over, and its next events follow the ones it had.
	fence := store.Fence{RunID: "r1", Owner: "w1", Epoch: 1}
	step := store.CheckpointParams{Fence: fence, Now: t0,
		Run:      store.RunUpdate{Status: store.StatusRunning, Step: 2, Messages: 3, LeaseExpires: t0.Add(time.Hour)},
		Messages: []store.Message{{Seq: 2, Step: 2, Role: "user", Content: []byte(`[]`), CreatedAt: t0}},
		Events:   []store.Event{{Step: 2, Type: "checkpoint", Time: t0, Data: json.RawMessage(`{}`)}}}
	if err := s.Checkpoint(ctx, step); err != nil {
		t.Fatal(err)
	}
	over := step
	over.Messages = []store.Message{{Seq: 1, Step: 2, Role: "user", Content: []byte(`"over"`), CreatedAt: t0}}
	if err := s.Checkpoint(ctx, over); !errors.Is(err, store.ErrMessageExists) {
		t.Errorf("a checkpoint over message 1 of the migrated run: %v, want ErrMessageExists", err)
	}
	events, err := s.Events(ctx, "r1")
	if err != nil || len(events) != 3 || events[2].Seq != 3 || events[2].Type != "checkpoint" {
		t.Errorf("events after a step of the migrated run: %+v, %v; want the checkpoint as event 3", events, err)
	}
	if msgs, err := s.Messages(ctx, "r1"); err != nil || len(msgs) != 3 || msgs[2].Seq != 2 {
		t.Errorf("messages after a step of the migrated run: %+v, %v", msgs, err)
	}
}

// quoteLiteral quotes s as a PostgreSQL string literal.
func quoteLiteral(s string) string {
	return "E'" + strings.NewReplacer(`\`, `\\`, "'", `\'`, "\n", `\n`).Replace(s) + "'"
}
