package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/migration"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

// ErrClosed is returned by writes made after Close.
var ErrClosed = errors.New("sqlite store closed")

// A batch is one transaction, begun and ended by the writer itself on its
// own connection: its prepared statements then run without database/sql
// rebinding each of them to a transaction, a tenth of the writer's time.
// IMMEDIATE takes the write lock up front, so a transaction never has to
// upgrade a read lock another process has invalidated.
//
// Each request of a batch runs inside a savepoint when the batch is run
// again, so a request that fails (a fenced-off checkpoint, say) is undone
// without aborting the others.
const (
	beginSQL       = "BEGIN IMMEDIATE"
	commitSQL      = "COMMIT"
	rollbackAllSQL = "ROLLBACK"
	savepointSQL   = "SAVEPOINT request"
	rollbackSQL    = "ROLLBACK TO request"
	releaseSQL     = "RELEASE request"
)

// writer owns the only connection that writes and group-commits the
// requests sent to it.
type writer struct {
	// db has one connection, conn, used only by the writer goroutine once
	// Open returns.
	db       *sql.DB
	conn     *sql.Conn
	stmts    map[string]*sql.Stmt
	maxBatch int
	turns    turns
	// damage stops the writer for good once a statement of the store
	// finds the file damaged.
	damage *damage
	// wakeups is stamped after a commit that made a run due.
	wakeups *wakeupFile

	// requests is unbuffered: a request is either taken by the writer, which
	// then always replies, or never sent.
	requests chan *request
	stop     chan struct{}
	done     chan struct{}

	commits atomic.Int64
	writes  atomic.Int64
	bytes   atomic.Int64
}

// request is one write: fn runs inside the batch's transaction.
type request struct {
	// ctx is the caller's, carried like an http.Request's: a request whose
	// caller has given up before its turn is skipped.
	ctx context.Context
	fn  func(ctx context.Context, tx *writeTx) error
	// bytes is the payload the request writes, for Stats.
	bytes int64
	// err is buffered so that the writer never waits for a caller that has
	// given up.
	err chan error
}

// openWriter opens the write connection, migrates the database and starts
// the writer goroutine.
func openWriter(ctx context.Context, path string, cfg Config, ms []migration.File, d *damage) (*writer, error) {
	db, err := openWatched(writerDSN(path, cfg), d)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	w := &writer{
		db:       db,
		damage:   d,
		stmts:    make(map[string]*sql.Stmt, len(writeQueries)),
		maxBatch: cfg.MaxBatch,
		requests: make(chan *request),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	w.turns.timeout, w.turns.stop = cfg.BusyTimeout, w.stop
	w.turns.path, w.turns.schema = path, len(ms)
	if err := migrate(ctx, db, path, ms); err != nil {
		db.Close()
		return nil, err
	}
	if w.wakeups, err = openWakeupFile(path); err != nil {
		db.Close()
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	w.conn = conn
	// The writer waits for the write lock itself (see turns).
	if _, err := conn.ExecContext(ctx, busyTimeoutOffSQL); err != nil {
		w.closeDB()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	for _, q := range writeQueries {
		// The driver caches a statement only if nothing follows it, not
		// even the file's final newline.
		stmt, err := conn.PrepareContext(ctx, strings.TrimSpace(q))
		if err != nil {
			w.closeDB()
			return nil, fmt.Errorf("open %s: prepare: %w", path, err)
		}
		w.stmts[q] = stmt
	}
	go w.run()
	return w, nil
}

// do runs fn in the writer's next transaction and returns once that
// transaction has committed, or failed. A context error means nothing was
// written: once the writer has taken the request, do waits for its outcome
// (the writer skips a request whose context ended before its turn, and
// answers every request it takes), so a caller never hears "canceled" of a
// write that committed. Once the file is known to be damaged, do fails at
// once and nothing reaches the file.
func (w *writer) do(ctx context.Context, bytes int64, fn func(ctx context.Context, tx *writeTx) error) error {
	if err := w.damage.found(); err != nil {
		return err
	}
	r := &request{ctx: ctx, fn: fn, bytes: bytes, err: make(chan error, 1)}
	select {
	case w.requests <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-w.stop:
		return ErrClosed
	}
	return <-r.err
}

// run is the writer goroutine. It takes every request waiting, up to
// maxBatch, commits them in one transaction, replies, and starts over. It
// exits when stop is closed, never with a request taken and not replied to.
func (w *writer) run() {
	defer close(w.done)
	batch := make([]*request, 0, w.maxBatch)
	errs := make([]error, 0, w.maxBatch)
	for {
		select {
		case r := <-w.requests:
			batch = append(batch, r)
		case <-w.stop:
			return
		}
	fill:
		for len(batch) < w.maxBatch {
			select {
			case r := <-w.requests:
				batch = append(batch, r)
			default:
				break fill
			}
		}

		errs = errs[:len(batch)]
		w.commit(batch, errs)
		// Replies go out only now, so that no caller hears of success
		// before the transaction is durable.
		for i, r := range batch {
			if errs[i] == nil {
				w.bytes.Add(r.bytes)
			}
			r.err <- errs[i]
		}
		clear(batch)
		batch = batch[:0]
		w.turns.stepAside()
	}
}

// commit runs the batch in one transaction and sets errs[i] to the outcome
// of batch[i]. If the transaction as a whole fails, nothing of the batch is
// written and every request fails. If it failed because the file is
// damaged, every request that ran fails with that error, whatever else it
// met: none was written, and none will be.
func (w *writer) commit(batch []*request, errs []error) {
	clear(errs)
	err := w.execute(batch, errs)
	if err == nil {
		return
	}
	corrupt := errors.Is(err, store.ErrCorrupt)
	for i := range errs {
		switch {
		case errs[i] == nil:
			errs[i] = err
		case corrupt && !errors.Is(errs[i], store.ErrCorrupt) &&
			!errors.Is(errs[i], context.Canceled) && !errors.Is(errs[i], context.DeadlineExceeded):
			// A request skipped because its caller gave up keeps
			// saying so.
			errs[i] = err
		}
	}
}

// errRedo asks for the batch to run again with a savepoint per request.
var errRedo = errors.New("a request failed: run the batch again with savepoints")

// execute runs the batch, recording each request's own failure in errs, and
// returns an error if the transaction as a whole failed.
//
// Requests almost never fail (a fenced-off checkpoint is the usual case),
// so the batch first runs without savepoints, which cost two statements a
// request. If any request fails, that transaction is rolled back and the
// whole batch runs again, each request in its own savepoint, so the failed
// one is undone without aborting the others. Request functions must
// therefore be safe to run twice: they write only through tx and set their
// results afresh.
func (w *writer) execute(batch []*request, errs []error) error {
	if err := w.executeOnce(batch, errs, false); !errors.Is(err, errRedo) {
		return err
	}
	clear(errs)
	return w.executeOnce(batch, errs, true)
}

func (w *writer) executeOnce(batch []*request, errs []error, savepoints bool) error {
	// The transaction must not end with one caller's context: it carries
	// the others' writes too.
	ctx := context.Background()
	if err := w.damage.found(); err != nil {
		return err
	}
	tx := &writeTx{conn: w.conn, stmts: w.stmts}
	if err := w.turns.begin(tx); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	ran := int64(0)
	wake := false
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		if savepoints {
			if _, err := tx.ExecContext(ctx, savepointSQL); err != nil {
				tx.rollback()
				return fmt.Errorf("savepoint: %w", err)
			}
		}
		ran++
		tx.wake = false
		errs[i] = r.fn(ctx, tx)
		// A request, or a reader meanwhile, may have found the file
		// damaged: nothing of the batch is committed then.
		if err := w.damage.found(); err != nil {
			tx.rollback()
			return err
		}
		if errs[i] == nil {
			wake = wake || tx.wake
			if savepoints {
				if _, err := tx.ExecContext(ctx, releaseSQL); err != nil {
					tx.rollback()
					return fmt.Errorf("release savepoint: %w", err)
				}
			}
			continue
		}
		if !savepoints {
			tx.rollback()
			return errRedo
		}
		// A failure SQLite answers by rolling back the whole transaction
		// (SQLITE_FULL, say) makes this fail too.
		if _, err := tx.ExecContext(ctx, rollbackSQL); err != nil {
			tx.rollback()
			return fmt.Errorf("roll back to savepoint: %w", err)
		}
		if _, err := tx.ExecContext(ctx, releaseSQL); err != nil {
			tx.rollback()
			return fmt.Errorf("release savepoint: %w", err)
		}
	}
	if ran == 0 {
		// Every caller had given up before its turn: there is nothing to
		// commit, and a commit would count without a write.
		tx.rollback()
		return nil
	}
	if _, err := tx.ExecContext(ctx, commitSQL); err != nil {
		// A commit that failed (the disk is full, say) leaves the
		// transaction open.
		tx.rollback()
		return fmt.Errorf("commit: %w", err)
	}
	w.writes.Add(ran)
	w.commits.Add(1)
	if wake {
		w.wakeups.stamp()
	}
	return nil
}

// close stops the writer goroutine, waits for it to exit and closes the
// connection.
func (w *writer) close() error {
	close(w.stop)
	<-w.done
	return w.closeDB()
}

func (w *writer) closeDB() error {
	var errs []error
	for _, stmt := range w.stmts {
		errs = append(errs, stmt.Close())
	}
	if w.wakeups != nil {
		errs = append(errs, w.wakeups.close())
	}
	return errors.Join(append(errs, w.conn.Close(), w.db.Close())...)
}

// writeQueries are prepared once on the writer's connection.
var writeQueries = []string{
	journalAppendSQL, runTraceGrowSQL,
	beginSQL, commitSQL, rollbackAllSQL, savepointSQL, rollbackSQL, releaseSQL, dataVersionSQL, userVersionSQL,
	runInsertSQL, runGetByRequestSQL, runDueSQL, runDueTenantsSQL, runDueQueuedSQL, runTenantRunningSQL, tenantLimitGetSQL, runClaimSQL, runTakeOverSQL,
	runRenewLeaseSQL, runCheckpointSQL, runCheckpointKeepSQL, runFencedSQL, runFenceRenewSQL, runWakeDecidedSQL,
	effectGetSQL, effectInsertSQL, effectAttemptSQL, effectEndCallSQL, effectRestartSQL, effectSettleSQL,
	outboxInsertSQL,
	deliveryFanOutSQL, outboxDispatchSQL, deliveryDueSQL, deliveryLeaseSQL, deliverySettleSQL,
}

// writeTx is the batch's transaction as a request sees it. Its statements
// run prepared: parsing a statement costs more than running it.
type writeTx struct {
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
	// wake says the request in progress makes a run due: once the batch
	// commits, the writer stamps the wakeup file.
	wake bool
}

func (t *writeTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if stmt, ok := t.stmts[query]; ok {
		return stmt.ExecContext(ctx, args...)
	}
	return t.conn.ExecContext(ctx, query, args...)
}

func (t *writeTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if stmt, ok := t.stmts[query]; ok {
		return stmt.QueryContext(ctx, args...)
	}
	return t.conn.QueryContext(ctx, query, args...)
}

func (t *writeTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if stmt, ok := t.stmts[query]; ok {
		return stmt.QueryRowContext(ctx, args...)
	}
	return t.conn.QueryRowContext(ctx, query, args...)
}

// txAll runs query in tx and reads every row it returns with scan. The
// rows are closed before it returns: the writer's connection runs one
// statement at a time.
func txAll[T any](ctx context.Context, tx *writeTx, scan func(sqlrow.Scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	out, err := sqlrow.All(rows, scan)
	if err := errors.Join(err, rows.Close()); err != nil {
		return nil, err
	}
	return out, nil
}

// rollback ends the transaction, keeping nothing of it. It cannot fail in a
// way the writer could act on: a connection whose rollback fails fails the
// next begin too.
func (t *writeTx) rollback() {
	_, _ = t.ExecContext(context.Background(), rollbackAllSQL)
}
