package sqlite

import (
	"strings"
	"testing"
)

func TestMultiRowInserts(t *testing.T) {
	inserts := multiRowInserts("-- a comment\nINSERT INTO t (a, b) VALUES\n(?, ?)\n")
	if len(inserts) != rowsPerInsert {
		t.Fatalf("%d inserts, want %d", len(inserts), rowsPerInsert)
	}
	if want := "-- a comment\nINSERT INTO t (a, b) VALUES\n(?, ?)"; inserts[0] != want {
		t.Errorf("insert of one row:\n%s\nwant\n%s", inserts[0], want)
	}
	if want := "-- a comment\nINSERT INTO t (a, b) VALUES\n(?, ?),\n(?, ?),\n(?, ?)"; inserts[2] != want {
		t.Errorf("insert of three rows:\n%s\nwant\n%s", inserts[2], want)
	}
	for n, q := range inserts {
		if got := strings.Count(q, "?"); got != 2*(n+1) {
			t.Errorf("insert %d has %d placeholders, want %d", n+1, got, 2*(n+1))
		}
	}
}
