package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/migration"
)

// A Belay file is recognised by its application_id ("BLAY"); its schema
// version is PRAGMA user_version. Migration 001 sets the first, every
// migration sets the second to its own number.
const applicationID = 0x424c4159

//go:embed migration/*.up.sql
var migrationFS embed.FS

//go:embed query/schema_inspect.sql
var schemaInspectSQL string

// SchemaVersion is the schema version this package migrates a SQLite file
// to, and writes: the number of its latest migration.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil {
		// Misnumbered migration files, which the tests refuse; such a build
		// opens no store either.
		return 0
	}
	return len(ms)
}

// migrations returns the embedded migrations in order.
func migrations() ([]migration.File, error) {
	return migration.Load(migrationFS, "migration/*.up.sql")
}

type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// inspect returns the schema version of the database, 0 for a new one, or
// an error that says what to do with a file that is not ours.
func inspect(ctx context.Context, q queryRower, path string, latest int) (int, error) {
	var appID, version, tables int64
	if err := q.QueryRowContext(ctx, schemaInspectSQL).Scan(&appID, &version, &tables); err != nil {
		return 0, openError(path, err)
	}
	switch {
	case appID == applicationID:
	case appID == 0 && version == 0 && tables == 0:
		return 0, nil
	default:
		return 0, fmt.Errorf("%s holds another application's data: pass --db with another path: %w", path, store.ErrNotBelay)
	}
	if version > int64(latest) {
		return 0, fmt.Errorf("%s was written by a newer belay (schema %d, this binary knows %d): upgrade belay: %w",
			path, version, latest, store.ErrSchemaTooNew)
	}
	return int(version), nil
}

// sqliteHeader starts every SQLite database file.
const sqliteHeader = "SQLite format 3\x00"

var errNoHeader = errors.New("no SQLite header")

// probe refuses a file that is not a Belay database before any connection
// that could change it is opened.
func probe(ctx context.Context, path string, cfg Config, latest int) error {
	// SQLite takes a file shorter than its header for an empty database and
	// would write over it.
	header, err := readHeader(path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	if len(header) > 0 && string(header) != sqliteHeader {
		return openError(path, errNoHeader)
	}
	db, err := sql.Open("sqlite", probeDSN(path, cfg))
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	_, err = inspect(ctx, db, path, latest)
	return errors.Join(err, db.Close())
}

// migrate brings the database to the latest schema in one immediate
// transaction, so that of two processes opening a new file at once one
// migrates and the other finds it done.
func migrate(ctx context.Context, db *sql.DB, path string, ms []migration.File) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return openError(path, err)
	}
	defer tx.Rollback()

	version, err := inspect(ctx, tx, path, len(ms))
	if err != nil {
		return err
	}
	for _, m := range ms[version:] {
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migrate %s: %s: %w", path, m.Name, err)
		}
		var appID, got, tables int64
		if err := tx.QueryRowContext(ctx, schemaInspectSQL).Scan(&appID, &got, &tables); err != nil {
			return fmt.Errorf("migrate %s: %s: %w", path, m.Name, err)
		}
		if appID != applicationID || got != int64(m.Version) {
			return fmt.Errorf("migrate %s: %s left application id %#x, schema %d", path, m.Name, appID, got)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate %s: commit: %w", path, err)
	}
	return nil
}

// readHeader returns the first bytes of the file, none if it is empty or
// does not exist.
func readHeader(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, len(sqliteHeader))
	n, err := io.ReadFull(f, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}

// openError explains a file SQLite cannot read as a database.
func openError(path string, err error) error {
	if errors.Is(err, store.ErrCorrupt) {
		return err // the store's own connections say what to do already
	}
	var e *sqlitedriver.Error
	notDB := errors.Is(err, errNoHeader)
	if errors.As(err, &e) {
		switch e.Code() & 0xff {
		case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
			notDB = true
		}
	}
	if notDB {
		return fmt.Errorf("%s is not a SQLite database (corrupt or not a Belay file): move it aside or pass --db with another path: %w", path, err)
	}
	return fmt.Errorf("open %s: %w", path, err)
}
