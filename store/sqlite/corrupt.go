package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/belayrun/belay/store"
)

// A file whose interior pages are damaged opens like a sound one: SQLite
// reads only the first page to open it, and finds the damage when a
// statement first reaches a bad page, with SQLITE_CORRUPT ("database disk
// image is malformed"). Writing on would build new rows on pages SQLite can
// no longer read back, so the store stops writing at the first such error,
// whichever connection met it: every connection of the store is opened
// through a watchedConnector, which sees every error of every statement.

// damage records whether a statement of the store found its file damaged.
type damage struct {
	path string

	mu  sync.Mutex
	err error
}

// found returns nil while the file is sound as far as the store has seen, or
// the error of the first statement that found it damaged.
func (d *damage) found() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// note returns err unchanged unless it says the file is damaged; then it
// marks the store corrupt and returns err wrapped with store.ErrCorrupt and
// what to do.
func (d *damage) note(err error) error {
	if !isCorrupt(err) {
		return err
	}
	err = fmt.Errorf("%s is damaged (%w); belay writes nothing more to it: stop every belay process on it, run belay check --db %s, and restore it from the latest copy belay backup wrote: %w",
		d.path, err, d.path, store.ErrCorrupt)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.err == nil {
		d.err = err
	}
	return err
}

// isCorrupt reports whether err is SQLite's answer to a file it cannot read
// as a database. Extended codes (SQLITE_CORRUPT_INDEX, ...) keep the
// primary code in their low byte.
func isCorrupt(err error) bool {
	var e *sqlitedriver.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code() & 0xff {
	case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}

// openWatched opens a pool whose every error passes through d.
func openWatched(dsn string, d *damage) (*sql.DB, error) {
	c, err := sqlitedriver.NewConnector(dsn)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(watchedConnector{Connector: c, d: d}), nil
}

// driverConn is what database/sql uses of a modernc.org/sqlite connection;
// a watchedConn offers the same.
type driverConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// driverStmt is what database/sql uses of a modernc.org/sqlite statement.
type driverStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

var (
	_ driver.Connector = watchedConnector{}
	_ driverConn       = (*watchedConn)(nil)
	_ driverStmt       = (*watchedStmt)(nil)
	_ driver.Rows      = (*watchedRows)(nil)
	_ driver.Tx        = (*watchedTx)(nil)
)

type watchedConnector struct {
	driver.Connector
	d *damage
}

func (c watchedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, c.d.note(err)
	}
	dc, ok := conn.(driverConn)
	if !ok {
		conn.Close()
		return nil, fmt.Errorf("sqlite driver connection %T lacks a method belay uses", conn)
	}
	return &watchedConn{c: dc, d: c.d}, nil
}

type watchedConn struct {
	c driverConn
	d *damage
}

func (c *watchedConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *watchedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.c.PrepareContext(ctx, query)
	if err != nil {
		return nil, c.d.note(err)
	}
	ds, ok := s.(driverStmt)
	if !ok {
		s.Close()
		return nil, fmt.Errorf("sqlite driver statement %T lacks a method belay uses", s)
	}
	return &watchedStmt{s: ds, d: c.d}, nil
}

func (c *watchedConn) Close() error { return c.c.Close() }

func (c *watchedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *watchedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.c.BeginTx(ctx, opts)
	if err != nil {
		return nil, c.d.note(err)
	}
	return &watchedTx{tx: tx, d: c.d}, nil
}

func (c *watchedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := c.c.ExecContext(ctx, query, args)
	return r, c.d.note(err)
}

func (c *watchedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := c.c.QueryContext(ctx, query, args)
	if err != nil {
		return nil, c.d.note(err)
	}
	return newWatchedRows(r, c.d), nil
}

func (c *watchedConn) Ping(ctx context.Context) error { return c.d.note(c.c.Ping(ctx)) }

func (c *watchedConn) ResetSession(ctx context.Context) error { return c.c.ResetSession(ctx) }

func (c *watchedConn) IsValid() bool { return c.c.IsValid() }

type watchedStmt struct {
	s driverStmt
	d *damage
}

func (s *watchedStmt) Close() error  { return s.s.Close() }
func (s *watchedStmt) NumInput() int { return s.s.NumInput() }

// Exec and Query are never called: database/sql prefers the context
// methods when a statement has them.
func (s *watchedStmt) Exec(args []driver.Value) (driver.Result, error) {
	return s.ExecContext(context.Background(), named(args))
}

func (s *watchedStmt) Query(args []driver.Value) (driver.Rows, error) {
	return s.QueryContext(context.Background(), named(args))
}

func (s *watchedStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	r, err := s.s.ExecContext(ctx, args)
	return r, s.d.note(err)
}

func (s *watchedStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	r, err := s.s.QueryContext(ctx, args)
	if err != nil {
		return nil, s.d.note(err)
	}
	return newWatchedRows(r, s.d), nil
}

func named(args []driver.Value) []driver.NamedValue {
	nv := make([]driver.NamedValue, len(args))
	for i, v := range args {
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return nv
}

type watchedTx struct {
	tx driver.Tx
	d  *damage
}

func (t *watchedTx) Commit() error   { return t.d.note(t.tx.Commit()) }
func (t *watchedTx) Rollback() error { return t.d.note(t.tx.Rollback()) }

// watchedRows is where most damage shows: a query's first step may succeed
// and a later one reach the bad page.
type watchedRows struct {
	r driver.Rows
	d *damage
}

func newWatchedRows(r driver.Rows, d *damage) *watchedRows { return &watchedRows{r: r, d: d} }

func (r *watchedRows) Columns() []string { return r.r.Columns() }
func (r *watchedRows) Close() error      { return r.d.note(r.r.Close()) }

// Next returns io.EOF unchanged: note passes on every error that is not
// SQLite's word for a damaged file.
func (r *watchedRows) Next(dest []driver.Value) error { return r.d.note(r.r.Next(dest)) }
