package postgres

import (
	"embed"
	"io/fs"
	"testing"

	"github.com/belayrun/belay/store/storetest"
)

//go:embed query/*.sql
var queryFiles embed.FS

// TestQueries checks that every query a shared scanner reads selects its
// columns, in its order.
func TestQueries(t *testing.T) {
	queries, err := fs.Sub(queryFiles, "query")
	if err != nil {
		t.Fatal(err)
	}
	storetest.Queries(t, queries)
}
