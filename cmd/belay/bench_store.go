package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/postgres"
)

// newBenchSchema names a PostgreSQL schema of bench's own.
func newBenchSchema() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "belay_bench_" + hex.EncodeToString(b[:])
}

// openBenchStore opens the store bench measures: the SQLite file, or a new
// schema of its own on PostgreSQL, which cleanup drops.
func openBenchStore(ctx context.Context, cfg benchConfig) (store.Store, string, func(), error) {
	if cfg.url == "" {
		s, err := openStore(ctx, cfg.path)
		if err != nil {
			return nil, "", nil, err
		}
		return s, "sqlite", func() { s.Close() }, nil
	}
	schema := cfg.schema
	if schema == "" {
		schema = newBenchSchema()
	}
	// The pool the store opens by default, as `belay serve` has: group
	// commit needs few connections, and on two cores 64 server processes
	// spent more time switching between themselves than writing.
	s, err := postgres.Open(ctx, cfg.url, postgres.Config{Schema: schema})
	if err != nil {
		return nil, "", nil, fmt.Errorf("bench: open %s: %w", redactURL(cfg.url), err)
	}
	cleanup := func() {
		s.Close()
		conn, err := pgx.Connect(context.WithoutCancel(ctx), cfg.url)
		if err != nil {
			return
		}
		defer conn.Close(context.WithoutCancel(ctx))
		_, _ = conn.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	}
	return s, "postgres", cleanup, nil
}

// storeStats reads the store's writer counters; ok is false for a store
// that keeps none.
func storeStats(s store.Store) (stats store.WriterStats, ok bool) {
	if st, ok := s.(store.WriterStatsReporter); ok {
		return st.WriterStats(), true
	}
	return store.WriterStats{}, false
}

// storeSize returns the bytes the store takes on disk: the SQLite file, or
// the PostgreSQL schema's tables with their indexes.
func storeSize(ctx context.Context, s store.Store) (int64, error) {
	if st, ok := s.(store.Sizer); ok {
		return st.Size(ctx)
	}
	return 0, nil
}
