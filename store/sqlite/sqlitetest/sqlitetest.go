// Package sqlitetest damages SQLite store files the way a failing disk or a
// file copied mid-write does, for the tests of what must notice: the store,
// the server's readiness check, the metrics and belay check.
package sqlitetest

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	_ "embed"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/belayrun/belay/store"
)

// Garbage is the byte damaged pages are filled with. It is no b-tree page
// type, so SQLite finds every page it fills unreadable.
const Garbage = 0xa5

//go:embed pages.sql
var pagesSQL string

// CreateRuns creates n runs in tenant "t", each with one trace event: with
// a hundred or more, the runs and events b-trees have interior pages.
func CreateRuns(t testing.TB, s store.Store, n int) {
	t.Helper()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// At once, so that the store group-commits them.
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, _, errs[i] = s.CreateRun(context.Background(), store.CreateRunParams{
				ID: fmt.Sprintf("run-%05d", i), Tenant: "t", User: "u", Agent: "a", AgentVersion: "v1",
				Input: "I was charged twice for invoice INV-2026-004512", Now: now,
				Events: []store.Event{{Type: "created", Time: now, Data: []byte(`{"input":"I was charged twice for invoice INV-2026-004512"}`)}},
			})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("create runs: %v", err)
		}
	}
}

// DamageInterior fills every interior page of the b-tree name (a table or
// an index) of the database file at path with Garbage, and returns their
// numbers. No connection may have the file open: close the store first,
// so that its write-ahead log is folded into the file. The test fails if
// the b-tree has no interior page; it needs more rows.
func DamageInterior(t testing.TB, path, name string) []int64 {
	t.Helper()
	return damage(t, path, name, "internal")
}

// DamageLeaves is DamageInterior for the leaf pages of name, those that
// hold its rows, except the file's first page: that holds the file's
// header, and without it the file is no SQLite file at all.
func DamageLeaves(t testing.TB, path, name string) []int64 {
	t.Helper()
	return damage(t, path, name, "leaf")
}

func damage(t testing.TB, path, name, pageType string) []int64 {
	t.Helper()
	if info, err := os.Stat(path + "-wal"); err == nil && info.Size() > 0 {
		t.Fatalf("damage %s: its write-ahead log holds pages; close the store first", path)
	}
	// Read-write but query-only, so that closing removes the -wal and -shm
	// files opening made, as the store's own Close does.
	u := url.URL{Scheme: "file", Path: path, OmitHost: true, RawQuery: url.Values{"_pragma": {"query_only(1)"}}.Encode()}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(pagesSQL, sql.Named("name", name), sql.Named("pagetype", pageType))
	if err != nil {
		t.Fatalf("damage %s: %v", path, err)
	}
	type page struct{ no, offset, size int64 }
	var pages []page
	for rows.Next() {
		var p page
		if err := rows.Scan(&p.no, &p.offset, &p.size); err != nil {
			t.Fatal(err)
		}
		if p.no != 1 {
			pages = append(pages, p)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("damage %s: %v", path, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatalf("damage %s: %s has no %s page besides the first: create more rows", path, name, pageType)
	}

	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	nums := make([]int64, len(pages))
	for i, p := range pages {
		if _, err := f.WriteAt(bytes.Repeat([]byte{Garbage}, int(p.size)), p.offset); err != nil {
			t.Fatal(err)
		}
		nums[i] = p.no
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return nums
}
