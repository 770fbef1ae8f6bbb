package sqlrow

import (
	"slices"
	"testing"
)

func TestResultColumns(t *testing.T) {
	cases := []struct {
		name, query string
		want        []string
	}{
		{"select", "SELECT id, tenant FROM runs WHERE id = @id;", []string{"id", "tenant"}},
		{"qualified and aliased", "SELECT e.id, r.id AS run_id, e.step FROM runs r JOIN events e ON e.run_ref = r.ref",
			[]string{"id", "run_id", "step"}},
		{"case and quotes", `select ID, "Mixed" from t`, []string{"id", "Mixed"}},
		{"distinct", "SELECT DISTINCT tenant, agent FROM runs", []string{"tenant", "agent"}},
		{"expression without alias", "SELECT count(*), max(a, b) AS m FROM t", []string{"count ( * )", "m"}},
		{"subquery in the list", "SELECT (SELECT x, y FROM u LIMIT 1) AS z, w FROM t", []string{"z", "w"}},
		{"comments and strings", "-- SELECT a, b FROM c\nSELECT /* x, y */ a, 'p, q' AS s, b -- , c\nFROM t",
			[]string{"a", "s", "b"}},
		{"returning", "UPDATE runs SET x = 1 WHERE id = @id RETURNING id, tenant;", []string{"id", "tenant"}},
		{"insert returning", "INSERT INTO t (a, b) VALUES (1, 2) ON CONFLICT (a) DO NOTHING RETURNING a, b",
			[]string{"a", "b"}},
		{"insert select", "INSERT INTO t (a, b) SELECT a, b FROM u", nil},
		{"insert select returning", "INSERT INTO t (a, b) SELECT a, b FROM u RETURNING b", []string{"b"}},
		{"update without returning", "UPDATE t SET a = (SELECT max(a) FROM u)", nil},
		{"with", "WITH due AS (SELECT id FROM runs), c AS (UPDATE runs SET a = 1 FROM due RETURNING runs.*)\nSELECT id, tenant FROM c ORDER BY id",
			[]string{"id", "tenant"}},
		{"star", "SELECT t.* FROM t", []string{"*"}},
		{"union", "SELECT a, b FROM t UNION ALL SELECT c, d FROM u", []string{"a", "b"}},
		{"no rows", "PRAGMA wal_checkpoint(TRUNCATE)", nil},
		{"statements", "DELETE FROM a; SELECT x FROM b;", []string{"x"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ResultColumns(c.query)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("ResultColumns = %q, want %q", got, c.want)
			}
		})
	}
}

func TestResultColumnsErrors(t *testing.T) {
	for _, q := range []string{
		"SELECT a FROM t; SELECT b FROM u",
		"SELECT 'a FROM t",
		"SELECT a /* FROM t",
		`SELECT "a FROM t`,
	} {
		if got, err := ResultColumns(q); err == nil {
			t.Errorf("ResultColumns(%q) = %q, want an error", q, got)
		}
	}
}

func TestRowType(t *testing.T) {
	for _, c := range []struct {
		query, want string
		err         bool
	}{
		{"SELECT 1", "", false},
		{"-- columns: run\nSELECT id FROM runs", "run", false},
		{"-- A comment.\n  --  columns:  customer_effect  \nSELECT 1", "customer_effect", false},
		{"-- the columns: run are listed below\nSELECT 1", "", false},
		{"-- columns: runs\nSELECT 1", "", true},
		{"-- columns: run\n-- columns: run\nSELECT 1", "", true},
	} {
		got, err := RowType(c.query)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("RowType(%q) = %q, %v; want %q, error %v", c.query, got, err, c.want, c.err)
		}
	}
}

// FuzzResultColumns checks that no text makes the parser panic.
func FuzzResultColumns(f *testing.F) {
	for _, q := range []string{
		"SELECT id, tenant FROM runs",
		"-- columns: run\nUPDATE runs SET a = 1 RETURNING id, (SELECT 1) AS x",
		"WITH d AS (SELECT 1) SELECT 'a''b' AS s, \"Q\" FROM d; DELETE FROM t",
		"SELECT /* ( */ a FROM t",
		"SELECT ((a, b)) AS c",
	} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q string) {
		_, _ = ResultColumns(q)
		_, _ = RowType(q)
	})
}
