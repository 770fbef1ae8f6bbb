package sqlite

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkWriteFloor measures what SQLite itself costs for the rows a step
// writes, with nothing of Belay around them: one connection, the store's
// pragmas and schema, prepared statements, floorBatch steps a transaction
// (about a group commit of the writer at 64 runs) and synchronous=FULL.
// Its ns/op is the cost of one step's rows; it is the floor under the
// writer's time per step in BenchmarkCheckpoint and belay bench, so it says
// how many durable steps a second one writer can reach on this machine:
//
//	go test -run XXX -bench WriteFloor -benchtime 20000x ./store/sqlite/
//
// The shapes: the run's fenced update as a checkpoint writes it
// (run_checkpoint.sql, every column of the run); a narrow update of a table
// that holds only what changes every step (step, status, usage, lease), the
// "hot row" a redesign would write instead; one journal row of a step's
// size; and each update with the journal row.
func BenchmarkWriteFloor(b *testing.B) {
	const body = 700 // bytes of a step's journal row in belay bench
	shapes := []struct {
		name  string
		stmts []string
	}{
		{"run-update", []string{floorRunUpdate}},
		{"hot-row-update", []string{floorHotUpdate}},
		{"journal-row", []string{floorJournalInsert}},
		{"run-update+journal-row", []string{floorRunUpdate, floorJournalInsert}},
		{"hot-row-update+journal-row", []string{floorHotUpdate, floorJournalInsert}},
	}
	for _, shape := range shapes {
		b.Run(shape.name, func(b *testing.B) {
			db, refs := floorStore(b)
			stmts := make([]*sql.Stmt, len(shape.stmts))
			for i, q := range shape.stmts {
				st, err := db.Prepare(q)
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				stmts[i] = st
			}
			payload := []byte(`{"m":[],"e":[],"pad":"` + strings.Repeat("x", body-22) + `"}`)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; {
				tx, err := db.Begin()
				if err != nil {
					b.Fatal(err)
				}
				for end := min(i+floorBatch, b.N); i < end; i++ {
					ref := refs[i%len(refs)]
					for _, st := range stmts {
						if _, err := tx.Stmt(st).Exec(
							sql.Named("ref", ref), sql.Named("id", fmt.Sprintf("run-%02d", ref)),
							sql.Named("step", i), sql.Named("now", int64(i)), sql.Named("body", payload),
							sql.Named("status", "running"), sql.Named("lease_expires", int64(i)+1),
						); err != nil {
							b.Fatal(err)
						}
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}

// floorBatch is the steps a transaction of the floor writes.
const floorBatch = 27

// floorStore makes a store of 64 claimed runs, plus the narrow table of
// the hot-row shape, and returns a raw connection to its file with the
// store's pragmas, and the runs' refs.
func floorStore(b *testing.B) (*sql.DB, []int64) {
	path := filepath.Join(b.TempDir(), "belay.db")
	s, err := Open(b.Context(), path, Config{})
	if err != nil {
		b.Fatal(err)
	}
	for i := range 64 {
		claimOne(b, s, fmt.Sprintf("run-%02d", i))
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	db, err := sql.Open("sqlite", writerDSN(path, Config{}.withDefaults()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(floorHotTable); err != nil {
		b.Fatal(err)
	}
	rows, err := db.Query("SELECT ref FROM runs ORDER BY ref")
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var refs []int64
	for rows.Next() {
		var ref int64
		if err := rows.Scan(&ref); err != nil {
			b.Fatal(err)
		}
		refs = append(refs, ref)
	}
	if len(refs) != 64 {
		b.Fatalf("%d runs, want 64", len(refs))
	}
	return db, refs
}

const floorHotTable = `CREATE TABLE run_hot (
    ref INTEGER NOT NULL PRIMARY KEY, step INTEGER NOT NULL, status TEXT NOT NULL,
    lease_owner TEXT NOT NULL, lease_epoch INTEGER NOT NULL, lease_expires INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, cost_nano_usd INTEGER NOT NULL,
    event_count INTEGER NOT NULL, updated_at INTEGER NOT NULL) STRICT;
INSERT INTO run_hot SELECT ref, step, status, lease_owner, lease_epoch, lease_expires,
    input_tokens, output_tokens, cost_nano_usd, event_count, updated_at FROM runs;`

// floorRunUpdate is run_checkpoint.sql's statement with its fence, on the
// same columns; the values are a step's.
const floorRunUpdate = `UPDATE runs
SET status = @status, step = @step, message_count = @step, input_tokens = input_tokens + 10,
    output_tokens = output_tokens + 10, model_calls = model_calls + 1, cost_nano_usd = cost_nano_usd + 1000,
    plan = NULL, guard = CAST('{"turns":1,"stuck":{"window":["a","b","c"]}}' AS BLOB), resume_after = 0, stop_reason = '',
    stop_detail = '', final = '', escalation = NULL, lease_expires = @lease_expires,
    event_count = event_count + 4, updated_at = @now
WHERE id = @id AND lease_owner <> '' AND status NOT IN ('done', 'failed', 'escalated', 'canceled')`

const floorHotUpdate = `UPDATE run_hot
SET status = @status, step = @step, input_tokens = input_tokens + 10, output_tokens = output_tokens + 10,
    cost_nano_usd = cost_nano_usd + 1000, lease_expires = @lease_expires, event_count = event_count + 4,
    updated_at = @now
WHERE ref = @ref AND lease_owner <> '' AND status NOT IN ('done', 'failed', 'escalated', 'canceled')`

const floorJournalInsert = `INSERT INTO journal (run_ref, step, at, first_message, messages, first_event, events, body)
VALUES (@ref, @step, @now, @step, 2, @step, 4, @body)`
