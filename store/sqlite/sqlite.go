// Package sqlite is Belay's embedded store: one SQLite file, no server, a
// pure-Go driver (modernc.org/sqlite).
//
// All writes go through one connection owned by a writer goroutine that
// group-commits them: the requests waiting when a transaction starts share it,
// so many runs checkpointing at once cost one fsync, not one each. Reads use a
// separate pool; the file is in WAL mode, so they never wait for the writer.
//
// A write returns once its transaction has committed. If its context ends
// before the writer takes it, or before its turn in the batch, it returns
// the context's error and nothing of it is written; once taken, it waits
// for the outcome.
//
// Several processes may open the same file: write transactions take the
// write lock up front (BEGIN IMMEDIATE) and wait for it up to BusyTimeout,
// and writers that see each other take turns, so that none starves.
//
// A statement that finds the file damaged (SQLite's "database disk image is
// malformed") stops the store's writes for good: that write, the others of
// its batch and every later one fail with store.ErrCorrupt, and Health
// reports it. Reads go on where the pages they need are sound.
package sqlite

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "embed"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/belayrun/belay/store"
)

var (
	_ store.Store               = (*Store)(nil)
	_ store.HealthChecker       = (*Store)(nil)
	_ store.Canceler            = (*Store)(nil)
	_ store.WriterStatsReporter = (*Store)(nil)
	_ store.Sizer               = (*Store)(nil)
)

// migrateWait is how long opening a file waits for another process that
// holds its write lock, migrating it say.
const migrateWait = 10 * time.Minute

// readConns bounds the read pool. Reads are short; more connections than
// this mostly add memory.
const readConns = 4

// Config configures a Store. The zero value is ready to use.
type Config struct {
	// Synchronous is SQLite's synchronous pragma: OFF, NORMAL, FULL or EXTRA.
	// Default FULL: Belay promises that an acknowledged step survives power
	// loss, and in WAL mode NORMAL may lose the last commits.
	Synchronous string

	// BusyTimeout is how long a write waits for another process holding the
	// file's write lock before failing with "database is locked". Default 5s.
	BusyTimeout time.Duration

	// MaxBatch caps how many write requests share one transaction. Default
	// 256.
	MaxBatch int
}

func (c Config) withDefaults() Config {
	if c.Synchronous == "" {
		c.Synchronous = "FULL"
	}
	if c.BusyTimeout == 0 {
		c.BusyTimeout = 5 * time.Second
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 256
	}
	return c
}

func (c Config) validate() error {
	switch strings.ToUpper(c.Synchronous) {
	case "OFF", "NORMAL", "FULL", "EXTRA":
	default:
		return fmt.Errorf("synchronous %q: want OFF, NORMAL, FULL or EXTRA", c.Synchronous)
	}
	if c.BusyTimeout < time.Millisecond {
		return fmt.Errorf("busy timeout %s: want at least 1ms", c.BusyTimeout)
	}
	if c.MaxBatch < 1 {
		return fmt.Errorf("max batch %d: want at least 1", c.MaxBatch)
	}
	return nil
}

// Store is a Belay database in one SQLite file.
type Store struct {
	writer *writer
	read   *reader
	// damage is shared by every connection of the store: once one finds
	// the file damaged, the writer takes no more writes.
	damage *damage
	// path and cfg open the connections a Backup needs.
	path string
	cfg  Config

	closeOnce sync.Once
	closeErr  error
}

// Open opens the Belay database at path, creating it if it does not exist
// and migrating it to the schema this binary knows.
//
// A file that is not SQLite (its header is not SQLite's), a SQLite file of
// another application (store.ErrNotBelay), a Belay file of a newer schema
// (store.ErrSchemaTooNew) and one whose schema SQLite cannot read are
// refused without being modified.
//
// Open reads no other page: damage to the pages of tables and indexes is
// found by the first statement that reaches it, and the store then writes
// nothing more (see Health). Open runs no integrity check because one reads
// the whole file: on a store of 10,000 runs of 8 steps (83 MB, page cache
// warm, 2 shared cores) Open takes 3 ms, SQLite's quick_check 150-220 ms
// and integrity_check 390-580 ms, and both grow with the file, on every
// start of a worker and every belay command. Check (belay check) runs them
// when an operator asks; and no check at open would find damage that comes
// after it.
func Open(ctx context.Context, path string, cfg Config) (*Store, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}

	ms, err := migrations()
	if err != nil {
		return nil, err
	}
	// Connections of the writer and the read pool switch the file to WAL,
	// which rewrites its header, so the file is inspected first by a
	// connection that only reads.
	if err := probe(ctx, path, cfg, len(ms)); err != nil {
		return nil, err
	}

	d := &damage{path: path}
	w, err := openWriter(ctx, path, cfg, ms, d)
	if err != nil {
		return nil, err
	}
	read, err := openWatched(readerDSN(path, cfg), d)
	if err != nil {
		w.close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	read.SetMaxOpenConns(readConns)
	read.SetMaxIdleConns(readConns)
	return &Store{writer: w, read: &reader{db: read}, damage: d, path: path, cfg: cfg}, nil
}

// Health returns nil until a statement of the store finds its file
// damaged, then an error wrapping store.ErrCorrupt that says what to do;
// from then on every write fails with that error. It reads nothing from
// the file.
func (s *Store) Health(ctx context.Context) error {
	return s.damage.found()
}

// Close stops the writer after the batch in flight, then closes the
// database. Writes made after Close fail with ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = errors.Join(s.writer.close(), s.read.Close())
	})
	return s.closeErr
}

// WriterStats returns the writer's counters since Open.
func (s *Store) WriterStats() store.WriterStats {
	return store.WriterStats{
		Commits:      s.writer.commits.Load(),
		Writes:       s.writer.writes.Load(),
		BytesWritten: s.writer.bytes.Load(),
		LockWaits:    s.writer.turns.waits.Load(),
	}
}

//go:embed query/wal_checkpoint.sql
var walCheckpointSQL string

//go:embed query/size.sql
var sizeSQL string

// Size returns the size of the database in bytes, after folding the WAL back
// into the main file.
func (s *Store) Size(ctx context.Context) (int64, error) {
	// The checkpoint does not fail when a reader in another process holds it
	// back; the size is then that of the pages checkpointed so far. A
	// damaged file is not written to, not even by a checkpoint.
	if s.damage.found() == nil {
		var busy, logPages, done int64
		if err := s.read.QueryRowContext(ctx, walCheckpointSQL).Scan(&busy, &logPages, &done); err != nil {
			return 0, fmt.Errorf("checkpoint wal: %w", err)
		}
	}
	var n int64
	if err := s.read.QueryRowContext(ctx, sizeSQL).Scan(&n); err != nil {
		return 0, fmt.Errorf("database size: %w", err)
	}
	return n, nil
}

// pragmas run on every new connection, before its first statement.
func pragmas(cfg Config) url.Values {
	return pragmasWaiting(cfg, cfg.BusyTimeout)
}

// pragmasWaiting are pragmas with a wait of busy for another process's
// lock.
func pragmasWaiting(cfg Config, busy time.Duration) url.Values {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(busy.Milliseconds(), 10)+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous("+strings.ToUpper(cfg.Synchronous)+")")
	q.Add("_pragma", "foreign_keys(ON)")
	return q
}

// writerDSN makes every transaction of the writer BEGIN IMMEDIATE: it takes
// the write lock before reading, so a transaction never has to upgrade a
// read lock another process has invalidated.
//
// Its busy timeout is that of opening the file: another process may be
// migrating it, which takes seconds for a file of hundreds of MB, and
// opening waits for that. The writer then waits for the lock itself, up to
// BusyTimeout (see turns).
func writerDSN(path string, cfg Config) string {
	q := pragmasWaiting(cfg, max(cfg.BusyTimeout, migrateWait))
	q.Set("_txlock", "immediate")
	return fileURI(path, q)
}

func readerDSN(path string, cfg Config) string {
	q := pragmas(cfg)
	q.Add("_pragma", "query_only(ON)")
	return fileURI(path, q)
}

// probeDSN leaves out journal_mode, which would rewrite the header of a
// file that is not ours yet.
func probeDSN(path string, cfg Config) string {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(cfg.BusyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "query_only(ON)")
	return fileURI(path, q)
}

// fileURI escapes path so that characters such as '?' and '#' stay part of
// the file name.
func fileURI(path string, q url.Values) string {
	u := url.URL{Scheme: "file", Path: path, OmitHost: true, RawQuery: q.Encode()}
	return u.String()
}
