package main

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/postgres"
	"github.com/belayrun/belay/store/sqlite"
)

// openStore opens the SQLite store at path, creating it if it does not
// exist. Errors say which file and, where it helps, what to do.
func openStore(ctx context.Context, path string) (*sqlite.Store, error) {
	s, err := sqlite.Open(ctx, path, sqlite.Config{})
	switch {
	case err == nil:
		return s, nil
	case errors.Is(err, store.ErrNotBelay):
		return nil, fmt.Errorf("open store %s: %w (pass --db with a file that belay demo or belay serve wrote)", path, err)
	case errors.Is(err, store.ErrSchemaTooNew):
		return nil, fmt.Errorf("open store %s: %w (upgrade belay)", path, err)
	default:
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
}

// storeTarget is the store a command works on: a SQLite file or a
// PostgreSQL URL.
type storeTarget struct {
	path string
	url  string
	// schema is the PostgreSQL schema; empty for the store's default.
	schema string
	// pathSet and urlSet report the flags given on the command line: a
	// flag given wins over the other's environment variable, and both
	// given is an error.
	pathSet, urlSet bool
}

// targetFlag is --db or --database-url: setting it also records that it
// was given.
type targetFlag struct {
	t   *storeTarget
	url bool
}

func (f targetFlag) String() string {
	if f.t == nil {
		return ""
	}
	if f.url {
		return redactURL(f.t.url)
	}
	return f.t.path
}

func (f targetFlag) Set(s string) error {
	if f.url {
		f.t.url, f.t.urlSet = s, true
	} else {
		f.t.path, f.t.pathSet = s, true
	}
	return nil
}

// check resolves the flags against the environment: --db given means the
// SQLite file even when $BELAY_DATABASE_URL is set.
func (t *storeTarget) check() error {
	switch {
	case t.pathSet && t.urlSet:
		return errors.New("both --db and --database-url given: name one store")
	case t.pathSet:
		t.url = ""
	}
	return nil
}

// String is the flag that names the target, for messages that tell a user
// what to run next.
func (t *storeTarget) String() string {
	if t.url != "" && t.schema != "" {
		return "--database-url " + redactURL(t.url) + " --schema " + t.schema
	}
	if t.url != "" {
		return "--database-url " + redactURL(t.url)
	}
	return "--db " + t.path
}

// Name is the target for a person: the file, or the URL without password.
func (t *storeTarget) Name() string {
	if t.url != "" {
		return redactURL(t.url)
	}
	return t.path
}

// open opens the target, creating a SQLite file that does not exist.
func (t *storeTarget) open(ctx context.Context) (store.Store, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if t.url != "" {
		s, err := postgres.Open(ctx, t.url, postgres.Config{Schema: t.schema})
		if err != nil {
			return nil, fmt.Errorf("open store %s: %w", redactURL(t.url), err)
		}
		return s, nil
	}
	return openStore(ctx, t.path)
}

// openExisting opens a store that must already exist, migrating it if it
// is of an older schema: the commands that change a store use it, so a
// mistyped --db is an error instead of a new, empty database.
func (t *storeTarget) openExisting(ctx context.Context) (store.Store, error) {
	return t.openExistingAs(ctx, false)
}

// openReadOnly opens a store that must already exist at the schema this
// binary writes: the commands that only read use it, and never create,
// migrate or otherwise change a SQLite file.
func (t *storeTarget) openReadOnly(ctx context.Context) (store.Store, error) {
	return t.openExistingAs(ctx, true)
}

func (t *storeTarget) openExistingAs(ctx context.Context, readOnly bool) (store.Store, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if t.url != "" {
		return t.open(ctx)
	}
	return openExistingStore(ctx, t.path, readOnly)
}

// redactURL drops the password from a database URL, in its user part or
// as a password parameter, or from a keyword/value string ("host=... password=...").
func redactURL(raw string) string {
	if !strings.Contains(raw, "://") {
		return keywordPassword.ReplaceAllString(raw, "password=xxxxx")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable database URL)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

var keywordPassword = regexp.MustCompile(`password\s*=\s*('(\\.|[^'])*'|\S*)`)

// openExistingStore opens a SQLite store that must already exist: a file
// that does not, or holds no store yet (zero bytes, or a SQLite database
// without a table), is refused rather than made into a new, empty store.
// With readOnly, a store of an older schema is refused too, rather than
// migrated. Either way the file is left as it was.
func openExistingStore(ctx context.Context, path string, readOnly bool) (*sqlite.Store, error) {
	if err := holdsStore(ctx, path, readOnly); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return openStore(ctx, path)
}

// holdsStore refuses a file that does not exist or holds no store yet and,
// with readOnly, one of an older schema, reading it without writing.
func holdsStore(ctx context.Context, path string, readOnly bool) error {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return errors.New("no such file (run belay demo to create one, or pass --db PATH or set BELAY_DB)")
	case err != nil:
		return err
	case info.Mode().IsRegular() && info.Size() == 0:
		return errors.New("the file is empty: it holds no Belay store (pass --db with the file belay serve or belay demo wrote)")
	}
	return inspectExisting(ctx, path, readOnly)
}

//go:embed open_inspect.sql
var inspectSQL string

// sqliteHeader starts every SQLite database file.
const sqliteHeader = "SQLite format 3\x00"

// belayApplicationID marks a Belay file: store/sqlite sets SQLite's
// application_id to "BLAY" in its first migration.
const belayApplicationID = 0x424c4159

// inspectExisting reads the file's application id and schema version with a
// connection that writes nothing, and refuses a SQLite database without a
// table and, with readOnly, a Belay store older than this binary's schema.
// A file that is not SQLite's, or that it cannot read, is left to
// sqlite.Open, which refuses it untouched and says why; so is one of a
// newer schema.
func inspectExisting(ctx context.Context, path string, readOnly bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	header := make([]byte, len(sqliteHeader))
	_, err = io.ReadFull(f, header)
	f.Close()
	if err != nil || string(header) != sqliteHeader {
		return nil
	}
	// mode=rw opens without creating; query_only refuses every write; the
	// wait is for a process migrating the file.
	q := url.Values{"mode": {"rw"}, "_pragma": {"query_only(1)", "busy_timeout(5000)"}}
	dsn := (&url.URL{Scheme: "file", Path: path, OmitHost: true, RawQuery: q.Encode()}).String()
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil
	}
	defer db.Close()
	var appID, version, tables int64
	if err := db.QueryRowContext(ctx, inspectSQL).Scan(&appID, &version, &tables); err != nil {
		return nil
	}
	latest := int64(sqlite.SchemaVersion())
	switch {
	case appID == 0 && version == 0 && tables == 0:
		return errors.New("the SQLite database has no table: it holds no Belay store (pass --db with the file belay serve or belay demo wrote)")
	case readOnly && appID == belayApplicationID && version < latest:
		return fmt.Errorf("it is a Belay store of schema %d, older than this belay's %d, and a command that only reads does not migrate it; "+
			"stop the older belay processes on it and start belay serve on it (or any command that writes), which migrates it, or read it with the belay that wrote it", version, latest)
	}
	return nil
}

// getRun reads a run of any tenant and turns a missing run into an error
// that says how to find the right id.
func getRun(ctx context.Context, s store.Store, db *storeTarget, id string) (store.Run, error) {
	run, err := s.GetRun(ctx, "", id)
	if errors.Is(err, store.ErrNotFound) {
		return store.Run{}, fmt.Errorf("run %s not found in %s (list runs with: belay runs %s)", id, db.Name(), db)
	}
	if err != nil {
		return store.Run{}, fmt.Errorf("read run %s: %w", id, err)
	}
	return run, nil
}

// dbFlag registers --db and --database-url: the store a command works on.
func dbFlag(fs *commandFlags) *storeTarget {
	return dbFlagEnv(fs, os.Getenv)
}

// dbFlagEnv is dbFlag reading $BELAY_DB, $BELAY_DATABASE_URL and
// $BELAY_SCHEMA through getenv.
func dbFlagEnv(fs *commandFlags, getenv func(string) string) *storeTarget {
	def := getenv("BELAY_DB")
	if def == "" {
		def = "belay.db"
	}
	t := &storeTarget{path: def, url: getenv("BELAY_DATABASE_URL")}
	fs.Var(targetFlag{t: t}, "db", "path of the SQLite database (or $BELAY_DB; given, it wins over $BELAY_DATABASE_URL)")
	fs.Var(targetFlag{t: t, url: true}, "database-url", "PostgreSQL URL, instead of --db (or $BELAY_DATABASE_URL)")
	fs.StringVar(&t.schema, "schema", getenv("BELAY_SCHEMA"), "with --database-url, the schema of Belay's tables (default belay, or $BELAY_SCHEMA)")
	return t
}

// accessMode is what openAccess may do to the store.
type accessMode int

const (
	accessCreate accessMode = iota // create or migrate it: serve, the first key
	accessWrite                    // migrate it: keys revoke, webhooks add
	accessRead                     // neither: keys list, webhooks list
)

// openAccess opens a store for the server's credentials and webhooks. Only
// a command that sets a store up (serve, the first key) may create it: the
// others would read or change a new, empty file a mistyped --db named.
func (t *storeTarget) openAccess(ctx context.Context, mode accessMode) (store.AccessStore, error) {
	open := t.openExisting
	switch mode {
	case accessCreate:
		open = t.open
	case accessRead:
		open = t.openReadOnly
	}
	s, err := open(ctx)
	if err != nil {
		return nil, err
	}
	as, ok := s.(store.AccessStore)
	if !ok {
		s.Close()
		return nil, fmt.Errorf("the store of %s keeps no API keys", t.Name())
	}
	return as, nil
}
