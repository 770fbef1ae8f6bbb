package main

import (
	"context"
	cryptorand "crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the driver Belay's store uses, as "sqlite"

	// DBOS's SQLite support, on modernc.org/sqlite; DBOS needs it
	// imported even when it is given a handle of our own.
	_ "github.com/dbos-inc/dbos-transact-golang/dbos/driver/sqlite"
)

// systemDB is a new system database for DBOS: a SQLite file in a
// temporary directory, or a schema of its own in PostgreSQL.
type systemDB struct {
	// Exactly one of sqlite and url is set; schema goes with url.
	sqlite *sql.DB
	url    string
	schema string

	size    func(context.Context) (int64, error)
	cleanup func()
}

func openSystemDB(ctx context.Context, cfg config) (*systemDB, error) {
	if cfg.store == "postgres" {
		return openPostgres(ctx, cfg.url)
	}
	return openSQLite(ctx)
}

// openSQLite opens a new SQLite file the way DBOS opens one it is given
// as a sqlite: URL (sysdb.OpenSQLitePool in v1.9.0: WAL, BEGIN IMMEDIATE,
// a 5 s busy timeout, foreign keys, 8 open connections and 4 idle), with
// one change: synchronous=FULL, which Belay's store uses, where DBOS sets
// NORMAL. A commit is then on disk when it returns, in both.
//
// How they are set: as modernc.org/sqlite's _pragma parameters of the DSN,
// which the driver runs on every new connection of the pool before its
// first statement (Belay's store sets its pragmas the same way). The
// handle is given to DBOS as Config.SQLiteSystemDB, which DBOS uses as it
// is, leaving its pragmas to the caller. A sqlite: URL with
// _pragma=synchronous(FULL) would not do: DBOS keeps that parameter but
// then runs PRAGMA synchronous = NORMAL on one connection of the pool after
// opening it, so that connection would commit with NORMAL.
func openSQLite(ctx context.Context) (*systemDB, error) {
	dir, err := os.MkdirTemp("", "belay-bench-dbos-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "dbos.db")
	q := url.Values{}
	q.Set("_txlock", "immediate")
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "foreign_keys(ON)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	db, err := sql.Open("sqlite", (&url.URL{Scheme: "file", Path: path, OmitHost: true, RawQuery: q.Encode()}).String())
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(4)
	cleanup := func() {
		db.Close()
		os.RemoveAll(dir)
	}
	var mode string
	var sync int
	err = db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode)
	if err == nil {
		err = db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync)
	}
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	if mode != "wal" || sync != 2 {
		cleanup()
		return nil, fmt.Errorf("sqlite: journal_mode %s, synchronous %d: want wal, 2 (FULL)", mode, sync)
	}
	return &systemDB{
		sqlite: db,
		size: func(ctx context.Context) (int64, error) {
			// The pages the database holds once its WAL is folded
			// back into the file, as belay bench counts its own.
			var busy, logPages, done, pages, pageSize int64
			if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logPages, &done); err != nil {
				return 0, fmt.Errorf("sqlite: checkpoint: %w", err)
			}
			if err := db.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
				return 0, fmt.Errorf("sqlite: %w", err)
			}
			if err := db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize); err != nil {
				return 0, fmt.Errorf("sqlite: %w", err)
			}
			return pages * pageSize, nil
		},
		cleanup: cleanup,
	}, nil
}

// openPostgres gives DBOS a new schema of its own (Config.DatabaseSchema;
// DBOS creates it), dropped after. DBOS opens its own pool from the URL,
// with its defaults (20 connections).
func openPostgres(ctx context.Context, dbURL string) (*systemDB, error) {
	var nonce [4]byte
	_, _ = cryptorand.Read(nonce[:])
	schema := "dbos_bench_" + hex.EncodeToString(nonce[:])
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	ident := pgx.Identifier{schema}.Sanitize()
	return &systemDB{
		url:    dbURL,
		schema: schema,
		size: func(ctx context.Context) (int64, error) {
			var n int64
			err := conn.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
				FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
				WHERE n.nspname = $1 AND c.relkind IN ('r', 'm')`, schema).Scan(&n)
			if err != nil {
				return 0, fmt.Errorf("postgres: size: %w", err)
			}
			return n, nil
		},
		cleanup: func() {
			ctx := context.WithoutCancel(ctx)
			_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+ident+" CASCADE")
			conn.Close(ctx)
		},
	}, nil
}
