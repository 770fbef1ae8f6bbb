package support

import (
	"context"
	"database/sql"
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"modernc.org/sqlite" // registers the "sqlite" driver; its Error tells a busy lock
)

// The scenario's names, for code that checks the world after a run.
const (
	TicketID          = "T-1001"
	CustomerEmail     = "ada@example.com"
	InvoiceID         = "INV-2026-004512"
	DuplicateChargeID = "CH-2"
)

// ErrNotFound is returned for an id the world does not have.
var ErrNotFound = errors.New("not found")

var (
	//go:embed schema.sql
	schemaSQL string
	//go:embed seed.sql
	seedSQL string
)

// dsnParams configure every connection. busy_timeout comes first so that the
// switch to WAL waits for another process instead of failing; synchronous
// FULL because in WAL mode only FULL makes a commit survive power loss; and
// _txlock=immediate makes every transaction take the write lock up front: a
// transaction that reads, then writes, can otherwise fail with SQLITE_BUSY
// when another process wrote in between, which busy_timeout cannot help.
const dsnParams = "_pragma=busy_timeout(5000)&" + dsnRest

const dsnRest = "_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"

// World is the support desk's outside world: the knowledge base, billing,
// the mailbox and the CRM, as state in one SQLite file.
//
// Several processes may open the same file at once. Every method reads the
// database and nothing is cached, so what one process did is what the next
// one sees. A World is safe for concurrent use.
type World struct {
	db *sql.DB

	// AfterEffect, if set, is called with "refund", "email" or "note" when a
	// call has committed a new effect to the world and has not yet returned:
	// the moment a crash leaves the world changed and the caller unaware.
	// Crash tests stop the process there. A call that applies nothing new (a
	// repeated key) does not call it. Set it before the World is used.
	AfterEffect func(kind string)
}

// OpenWorld opens the world at path, creating the file and its tables if
// they do not exist. It does not seed the scenario; see Seed.
func OpenWorld(ctx context.Context, path string) (*World, error) {
	return openWorld(ctx, path, dsnParams)
}

// openWorld is OpenWorld with the connection parameters given: tests wait
// for a lock less long.
func openWorld(ctx context.Context, path, dsn string) (*World, error) {
	if path == "" || strings.ContainsRune(path, '?') {
		return nil, fmt.Errorf("open world %q: want a file path without '?'", path)
	}
	db, err := sql.Open("sqlite", path+"?"+dsn)
	if err != nil {
		return nil, fmt.Errorf("open world %s: %w", path, err)
	}
	w := &World{db: db}
	if err := w.claimFile(ctx, path); err != nil {
		_ = db.Close()
		return nil, err
	}
	if err := w.exec(ctx, schemaSQL); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open world %s: create schema: %w", path, err)
	}
	return w, nil
}

// worldApplicationID marks a SQLite file as a support world ("BLYW"), as
// Belay's store marks its own ("BLAY").
const worldApplicationID = 0x424c5957

// ErrNotWorld: the file is SQLite, but holds something other than a
// support world.
var ErrNotWorld = errors.New("not a support world")

// claimFile checks that the file is a support world, or new, and marks it
// as one. A world written before files were marked is known by its tables.
func (w *World) claimFile(ctx context.Context, path string) error {
	var appID, tables, worldTables int64
	err := w.db.QueryRowContext(ctx, `SELECT (SELECT application_id FROM pragma_application_id()),
		(SELECT count(*) FROM sqlite_master WHERE type = 'table'),
		(SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('kb_articles', 'accounts', 'tickets'))`).
		Scan(&appID, &tables, &worldTables)
	if err != nil {
		return fmt.Errorf("open world %s: %w (is it a SQLite file? pass --world with a new path to create a world)", path, err)
	}
	switch {
	case appID == worldApplicationID:
		return nil
	case appID != 0 || (tables > 0 && worldTables < 3):
		return fmt.Errorf("open world %s: the file holds another application's data (a Belay store, say); pass --world with a support world's path, or a new one: %w", path, ErrNotWorld)
	}
	if _, err := w.db.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", worldApplicationID)); err != nil {
		return fmt.Errorf("open world %s: mark the file: %w", path, err)
	}
	return nil
}

// Close closes the database.
func (w *World) Close() error { return w.db.Close() }

// DoubleChargeRequest is ticket T-1001 as Ada wrote it: the request of the
// scenario Seed prepares.
const DoubleChargeRequest = "Hi, I was charged twice for my last invoice (INV-2026-004512). Can you fix it? - Ada (ada@example.com), ticket T-1001"

// Seed inserts the scenario: ticket T-1001 from Ada Lovelace, invoice
// INV-2026-004512 of 288.00 USD charged twice (CH-1, and CH-2 the duplicate),
// and the knowledge base. Seeding again changes nothing, so every process of
// a demo may seed; it never undoes what a run did.
func (w *World) Seed(ctx context.Context) error {
	if err := w.exec(ctx, seedSQL); err != nil {
		return fmt.Errorf("seed world: %w", err)
	}
	return nil
}

// Counts are the effects the world holds.
type Counts struct {
	Refunds int `json:"refunds"`
	Emails  int `json:"emails"`
	Notes   int `json:"notes"`
}

// Counts counts the refunds, emails and CRM notes in the world.
func (w *World) Counts(ctx context.Context) (Counts, error) {
	var c Counts
	err := w.db.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM refunds),
		(SELECT count(*) FROM emails),
		(SELECT count(*) FROM crm_notes)`).Scan(&c.Refunds, &c.Emails, &c.Notes)
	if err != nil {
		return Counts{}, fmt.Errorf("count effects: %w", err)
	}
	return c, nil
}

// Fault names: the calls a fault makes fail.
const (
	faultLoseRefundResponse = "lose_refund_response"
	faultInvoiceUnavailable = "invoice_unavailable"
)

// SetLoseRefundResponses makes the next n refund calls do their work (apply
// the refund, or find the one there is), commit it, and then fail with an
// error wrapping belay.ErrUnknownOutcome, as a timeout does when the payment
// processor accepted the request and its answer never came back. Calls
// refused for a reason of their own (an unknown charge) do not count. n = 0
// turns it off.
func (w *World) SetLoseRefundResponses(ctx context.Context, n int) error {
	return w.setFault(ctx, faultLoseRefundResponse, n)
}

// SetInvoiceFailures makes the next n Invoice calls fail with a
// *TransientError before any succeeds, as a billing API answering 503 does.
// n = 0 turns it off.
func (w *World) SetInvoiceFailures(ctx context.Context, n int) error {
	return w.setFault(ctx, faultInvoiceUnavailable, n)
}

func (w *World) setFault(ctx context.Context, name string, n int) error {
	if n < 0 {
		return fmt.Errorf("set fault %s: count %d is negative", name, n)
	}
	_, err := w.db.ExecContext(ctx, `INSERT INTO faults (name, remaining) VALUES (?, ?)
		ON CONFLICT (name) DO UPDATE SET remaining = excluded.remaining`, name, n)
	if err != nil {
		return fmt.Errorf("set fault %s: %w", name, err)
	}
	return nil
}

// takeFault uses up one failure of the named fault, if any is left, and
// returns how many have fired so far. The decrement commits with whatever
// else tx does, so a call that rolls back does not use up a failure.
func takeFault(ctx context.Context, tx *sql.Tx, name string) (fired int, ok bool, err error) {
	err = tx.QueryRowContext(ctx, `UPDATE faults SET remaining = remaining - 1, fired = fired + 1
		WHERE name = ? AND remaining > 0 RETURNING fired`, name).Scan(&fired)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("take fault %s: %w", name, err)
	}
	return fired, true, nil
}

// exec runs a script of statements in one transaction.
func (w *World) exec(ctx context.Context, script string) error {
	return w.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, script)
		return err
	})
}

// tx runs fn in a transaction that holds the write lock (see dsnParams) and
// commits if fn returns nil.
func (w *World) tx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		if se, ok := errors.AsType[*sqlite.Error](err); ok && se.Code()&0xff == sqliteBusy {
			return &BusyError{err: err}
		}
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// afterEffect reports a committed effect to the crash hook.
func (w *World) afterEffect(kind string) {
	if w.AfterEffect != nil {
		w.AfterEffect(kind)
	}
}

// sqliteBusy is SQLite's primary result code for a lock it could not get.
const sqliteBusy = 5

// BusyError is a call that could not begin because other processes held the
// world's write lock for longer than it waits (busy_timeout). Nothing was
// changed, so calling again is safe: the error is transient, and Belay's
// tool executor retries it with backoff, even for a tool with side effects.
type BusyError struct{ err error }

func (e *BusyError) Error() string { return e.err.Error() + "; nothing was changed, try again" }
func (e *BusyError) Unwrap() error { return e.err }

// Transient reports that calling again may succeed.
func (e *BusyError) Transient() bool { return true }
