package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	_ "embed"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	_ store.AccessStore = (*Store)(nil)
	_ store.Canceler    = (*Store)(nil)
	_ store.Sizer       = (*Store)(nil)
)

// Config configures a Store. The zero value is ready to use.
type Config struct {
	// Schema holds Belay's tables. It is created if it does not exist, and
	// every connection's search_path names it alone. Default "belay".
	Schema string

	// MaxConns caps the connections of the pool. Default pgxpool's: the
	// greater of 4 and the number of CPUs. Each Wakeups listener holds one
	// more connection of its own.
	MaxConns int32

	// AppRole is the role that the requests of one tenant run as, confined
	// by row-level security. Open creates it (NOLOGIN) if it does not exist
	// and grants it what it needs; roles belong to the whole server, so
	// schemas may share one. Default "belay_app".
	AppRole string
}

func (c Config) withDefaults() Config {
	if c.Schema == "" {
		c.Schema = "belay"
	}
	if c.AppRole == "" {
		c.AppRole = "belay_app"
	}
	return c
}

// maxIdentifier is PostgreSQL's limit on the bytes of a name; longer names
// are silently truncated, which would make two schemas one.
const maxIdentifier = 63

func (c Config) validate() error {
	for _, name := range []struct{ what, v string }{{"schema", c.Schema}, {"app role", c.AppRole}} {
		if len(name.v) > maxIdentifier || strings.ContainsRune(name.v, 0) {
			return fmt.Errorf("%s %q: want at most %d bytes and no NUL", name.what, name.v, maxIdentifier)
		}
	}
	if c.MaxConns < 0 {
		return fmt.Errorf("max conns %d: want 0 (the default) or more", c.MaxConns)
	}
	return nil
}

// Store is a Belay database in a schema of a PostgreSQL database.
type Store struct {
	pool   *pgxpool.Pool
	schema string
	role   string

	checkpoints *checkpointer

	// mu guards listeners and closed. Wakeups adds to listeners; Close
	// cancels them all and waits for their goroutines.
	mu        sync.Mutex
	closed    bool
	listeners map[*listener]struct{}
	wg        sync.WaitGroup

	closeOnce sync.Once
}

// Open connects to the database at url (a PostgreSQL URL or keyword/value
// string, as pgx parses it) and migrates the schema cfg names to the version
// this binary knows.
//
// The role url connects as owns the schema's tables: it must be able to
// create them, and the application role unless it exists (see the package
// documentation). A schema holding another application's tables
// (store.ErrNotBelay) or written by a newer Belay (store.ErrSchemaTooNew) is
// refused without being modified.
func Open(ctx context.Context, url string, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if cfg.MaxConns > 0 {
		pc.MaxConns = cfg.MaxConns
	}
	// Set at connection startup, so the SQL never names the schema and a
	// connection costs no extra round trip.
	pc.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{cfg.Schema}.Sanitize()

	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	s := &Store{
		pool:      pool,
		schema:    cfg.Schema,
		role:      cfg.AppRole,
		listeners: make(map[*listener]struct{}),
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	s.checkpoints = startCheckpointer(s, checkpointWriters, checkpointBatch, checkpointHelperMin)
	return s, nil
}

// Close stops the Wakeups listeners and the checkpoint writers, waits for
// their goroutines to exit (a writer after the batch it is writing) and
// closes the pool, waiting for the connections in use to be released.
// Checkpoints made after Close fail with ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		for l := range s.listeners {
			l.cancel()
		}
		s.mu.Unlock()
		s.wg.Wait()
		s.checkpoints.close()
		s.pool.Close()
	})
	return nil
}

//go:embed query/scope.sql
var scopeSQL string

// A transaction acts either for one tenant or for all of them.
//
// With a tenant, its first statement switches to the application role and
// sets belay.tenant, so that row-level security confines every statement
// after it to that tenant's rows, whatever their WHERE clauses say. The empty
// tenant means every tenant, as in store.Store's methods: the transaction
// runs as the connecting role, which owns the tables and is not confined.

// batch returns a batch whose queries run as one implicit transaction for
// tenant when sent with send: one round trip, and nothing of it written if
// any query fails.
func (s *Store) batch(tenant string) *pgx.Batch {
	b := &pgx.Batch{}
	s.queueScope(b, tenant)
	return b
}

// txBatch returns a batch that begins an explicit transaction for tenant,
// for inTx: its queries go out with the BEGIN in one round trip.
func (s *Store) txBatch(tenant string) *pgx.Batch {
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	s.queueScope(b, tenant)
	return b
}

func (s *Store) queueScope(b *pgx.Batch, tenant string) {
	if tenant != "" {
		b.Queue(scopeSQL, namedArgs{"role": s.role, "tenant": tenant})
	}
}

// send runs a batch from batch and returns the first error, after calling
// the callbacks of the queries that ran.
func (s *Store) send(ctx context.Context, b *pgx.Batch) error {
	return storeError(s.pool.SendBatch(ctx, b).Close())
}

// inTx sends a batch from txBatch, then runs fn, if not nil, in the
// transaction it began, and commits. Any error rolls the transaction back.
func (s *Store) inTx(ctx context.Context, b *pgx.Batch, fn func(tx pgx.Tx) error) error {
	br := s.pool.SendBatch(ctx, b)
	tx := br.Tx()
	// After a commit this does nothing; it releases the connection in
	// every case.
	defer tx.Rollback(ctx)
	if err := br.Close(); err != nil {
		return storeError(err)
	}
	if fn != nil {
		if err := fn(tx); err != nil {
			return storeError(err)
		}
	}
	return storeError(tx.Commit(ctx))
}

// querier is what queryAll queries: the pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// queryAll runs query and reads every row it returns with scan.
func queryAll[T any](ctx context.Context, q querier, scan func(sqlrow.Scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sqlrow.All(rows, scan)
}

// collect is a batch query's callback that reads every row into *out with
// scan.
func collect[T any](out *[]T, scan func(sqlrow.Scanner) (T, error)) func(pgx.Rows) error {
	return func(rows pgx.Rows) (err error) {
		*out, err = sqlrow.All(rows, scan)
		return err
	}
}

// SQLSTATEs the SQL raises on purpose (raise_if in migration 001).
const (
	codeLeaseLost     = "BL001"
	codeNotFound      = "BL002"
	codeMessageExists = "BL003"
)

// storeError turns the errors the SQL raises on purpose into the store's.
func storeError(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch pe.Code {
	case codeLeaseLost:
		return store.ErrLeaseLost
	case codeNotFound:
		return fmt.Errorf("%s: %w", pe.Message, store.ErrNotFound)
	case codeMessageExists:
		return fmt.Errorf("%s: %w", pe.Message, store.ErrMessageExists)
	}
	return err
}
