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

// TestHotQueriesReadByIndex checks the plans of the queries a worker or a
// decision runs whatever the number of runs that wait: none may scan a
// table, or read an index wider than what it looks for, or idle workers and
// decisions cost more the more runs are parked. Without statistics SQLite
// chose the pending approvals' index for a run's own approvals, which cost
// a decision 10 ms over 20,000 parked runs.
func TestHotQueriesReadByIndex(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "belay.db")
	openTest(t, path)
	db, err := sql.Open("sqlite", readerDSN(path, Config{}.withDefaults()))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for name, c := range map[string]struct {
		query string
		args  []any
		want  []string // an index each plan step must use, in order
	}{
		"wake a decided run": {runWakeDecidedSQL, []any{sql.Named("run_id", "r"), sql.Named("now", 1)},
			[]string{"sqlite_autoindex_runs_1", "", "approvals_run"}},
		"runs under a live lease": {runLeasedSQL, []any{sql.Named("now", 1), sql.Named("limit", 10)},
			[]string{"runs_status_lease"}},
		"approvals due to expire": {approvalDueSQL, []any{sql.Named("now", 1)},
			[]string{"approvals_expiry"}},
	} {
		rows, err := db.Query("EXPLAIN QUERY PLAN "+c.query, c.args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		ok := len(plan) == len(c.want)
		for i := 0; ok && i < len(plan); i++ {
			ok = !strings.HasPrefix(plan[i], "SCAN ") && strings.Contains(plan[i], c.want[i])
		}
		if !ok {
			t.Errorf("plan of %s: %q, want steps using %q", name, plan, c.want)
		}
	}
}
