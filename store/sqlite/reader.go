package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"

	"github.com/belayrun/belay/store/internal/sqlrow"
)

// reader is the read pool. Its queries run prepared, each prepared once per
// connection on first use: parsing a query costs SQLite more than running
// one of Belay's.
type reader struct {
	db    *sql.DB
	stmts sync.Map // query text -> *sql.Stmt
}

func (r *reader) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if s, ok := r.stmts.Load(query); ok {
		return s.(*sql.Stmt), nil
	}
	// The driver caches a statement only if nothing follows it, not even
	// the file's final newline.
	s, err := r.db.PrepareContext(ctx, strings.TrimSpace(query))
	if err != nil {
		return nil, err
	}
	if prev, loaded := r.stmts.LoadOrStore(query, s); loaded {
		s.Close()
		return prev.(*sql.Stmt), nil
	}
	return s, nil
}

func (r *reader) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	s, err := r.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(ctx, args...)
}

// QueryRowContext returns a Row that carries a failure to prepare, like
// sql.DB's.
func (r *reader) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	s, err := r.stmt(ctx, query)
	if err != nil {
		// A query that cannot be prepared fails the same way unprepared.
		return r.db.QueryRowContext(ctx, query, args...)
	}
	return s.QueryRowContext(ctx, args...)
}

func (r *reader) Close() error {
	var errs []error
	r.stmts.Range(func(_, s any) bool {
		errs = append(errs, s.(*sql.Stmt).Close())
		return true
	})
	return errors.Join(append(errs, r.db.Close())...)
}

// readAll runs query on the read pool and reads every row it returns with
// scan.
func readAll[T any](ctx context.Context, r *reader, scan func(sqlrow.Scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sqlrow.All(rows, scan)
}
