package sqlite

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
)

// TestPruneListIsARangeOfEndedRuns checks the plan of the query that picks
// the runs to prune: a range of the index of ended runs, by when they ended.
// Keyed otherwise, it read every ended run still kept, under the write
// lock, at each prune: half a second for two million runs.
func TestPruneListIsARangeOfEndedRuns(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "belay.db")
	openTest(t, path)
	db, err := sql.Open("sqlite", readerDSN(path, Config{}.withDefaults()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("EXPLAIN QUERY PLAN "+runPruneListSQL, sql.Named("before", 1), sql.Named("limit", 10))
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
	if got := strings.Join(plan, "; "); got != "SEARCH runs USING INDEX runs_ended (ended_at<?)" {
		t.Errorf("plan of the prune's list: %s", got)
	}
}
