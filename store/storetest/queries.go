package storetest

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/belayrun/belay/store/internal/sqlrow"
)

// Queries checks a driver's queries, the .sql files of queries, against
// the scanners both drivers share (store/internal/sqlrow):
// a query that names its row type on a line "-- columns: run" selects, or
// returns, exactly that row type's columns in the order its scanner reads
// them; and a query that returns as many columns as the narrowest row type
// (a session's five) or more names its row type: a row that wide is read by
// a shared scanner, not by hand.
func Queries(t *testing.T, queries fs.FS) {
	t.Helper()
	var names []string
	err := fs.WalkDir(queries, ".", func(name string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && path.Ext(name) == ".sql" {
			names = append(names, name)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		t.Fatal("no .sql files")
	}
	for _, name := range names {
		t.Run(strings.TrimSuffix(path.Base(name), ".sql"), func(t *testing.T) {
			b, err := fs.ReadFile(queries, name)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkQuery(string(b)); err != "" {
				t.Errorf("%s: %s", name, err)
			}
		})
	}
}

// checkQuery says what is wrong with a query's result columns, or "".
func checkQuery(query string) string {
	rowType, err := sqlrow.RowType(query)
	if err != nil {
		return err.Error()
	}
	got, err := sqlrow.ResultColumns(query)
	if err != nil {
		return "parse result columns: " + err.Error()
	}
	if rowType == "" {
		if len(got) >= narrowestRow() {
			types := sqlrow.RowTypes()
			slices.Sort(types)
			return fmt.Sprintf("returns %s: name the row type its scanner reads on a line \"-- columns: <type>\" (%s)",
				strings.Join(got, ", "), strings.Join(types, ", "))
		}
		return ""
	}
	want, _ := sqlrow.Columns(rowType)
	if slices.Equal(got, want) {
		return ""
	}
	msg := fmt.Sprintf("columns: %s, but it returns\n\t%s\nwhere the scanner reads\n\t%s",
		rowType, strings.Join(got, ", "), strings.Join(want, ", "))
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("%s\nfirst difference: column %d is %s, not %s", msg, i+1, got[i], want[i])
		}
	}
	return fmt.Sprintf("%s\n(%d columns, not %d)", msg, len(got), len(want))
}

// narrowestRow is the number of columns of the narrowest row type.
func narrowestRow() int {
	n := -1
	for _, t := range sqlrow.RowTypes() {
		cols, _ := sqlrow.Columns(t)
		if n < 0 || len(cols) < n {
			n = len(cols)
		}
	}
	return n
}
