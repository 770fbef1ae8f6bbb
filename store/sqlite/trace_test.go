package sqlite

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
)

// TestEventsAfterReadsEachRunByIndex checks the plan of the read that live
// event streams wake to: it walks the cursors it is given, finds each run by
// its id and reads its journal from the cursor on through the journal's run
// index. Any other plan reads events of runs nobody streams, and a server's
// streams would cost more the longer its traces grow.
func TestEventsAfterReadsEachRunByIndex(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "belay.db")
	openTest(t, path)
	db, err := sql.Open("sqlite", readerDSN(path, Config{}.withDefaults()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+journalAfterSQL, sql.Named("runs", `[{"run":"r","after":1}]`), sql.Named("limit", 10))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	want := []string{"SCAN c VIRTUAL TABLE", "SEARCH r USING INDEX sqlite_autoindex_runs_1 (id=?)",
		"SEARCH j USING INDEX journal_run (run_ref=? AND <expr>>?)", "USE TEMP B-TREE FOR ORDER BY"}
	got := strings.Join(plan, "; ")
	for i, w := range want {
		if i >= len(plan) || !strings.HasPrefix(plan[i], w) {
			t.Fatalf("plan of EventsAfter: %s\nwant: %s", got, strings.Join(want, "; "))
		}
	}
}
