package main

import (
	"context"
	"errors"
	"fmt"
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

// openExisting opens a store that must already exist. Commands that only
// read use it, so a mistyped --db is an error instead of a new, empty
// database.
func (t *storeTarget) openExisting(ctx context.Context) (store.Store, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if t.url != "" {
		return t.open(ctx)
	}
	return openExistingStore(ctx, t.path)
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

// openExistingStore opens a store that must already exist. Commands that
// only read use it, so a mistyped --db is an error instead of a new, empty
// database.
func openExistingStore(ctx context.Context, path string) (*sqlite.Store, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("open store %s: no such file (run belay demo to create one, or pass --db PATH or set BELAY_DB)", path)
	} else if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return openStore(ctx, path)
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
	def := os.Getenv("BELAY_DB")
	if def == "" {
		def = "belay.db"
	}
	t := &storeTarget{path: def, url: os.Getenv("BELAY_DATABASE_URL")}
	fs.Var(targetFlag{t: t}, "db", "path of the SQLite database (or $BELAY_DB; given, it wins over $BELAY_DATABASE_URL)")
	fs.Var(targetFlag{t: t, url: true}, "database-url", "PostgreSQL URL, instead of --db (or $BELAY_DATABASE_URL)")
	fs.StringVar(&t.schema, "schema", "", "with --database-url, the schema of Belay's tables (default belay)")
	return t
}

// openAccess opens a store for the server's credentials and webhooks. Only
// a command that sets a store up (serve, the first key) may create it: the
// others would read or change a new, empty file a mistyped --db named.
func (t *storeTarget) openAccess(ctx context.Context, create bool) (store.AccessStore, error) {
	open := t.openExisting
	if create {
		open = t.open
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
