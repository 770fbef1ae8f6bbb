package support

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/belayrun/belay"
)

// ErrRefundExceedsCharge is returned for a refund larger than its charge.
var ErrRefundExceedsCharge = errors.New("refund exceeds the charge")

// TransientError is a billing call that failed on the billing side (a 503)
// and may succeed if made again. Nothing was changed.
type TransientError struct {
	// Op is the call that failed, like "get invoice INV-2026-004512".
	Op string
	// Call counts the injected failures so far, from 1.
	Call int
}

func (e *TransientError) Error() string {
	return fmt.Sprintf("%s: 503 billing API timeout (call %d); nothing was changed, try again", e.Op, e.Call)
}

// Transient reports that calling again may succeed.
func (e *TransientError) Transient() bool { return true }

// Invoice is a bill and the payments made against it.
type Invoice struct {
	ID          string
	AccountID   string
	Description string
	AmountCents int64
	Currency    string
	Status      string
	IssuedOn    string
	// Charges are the payments taken for the invoice, oldest first. Empty
	// when the invoice is listed with its account.
	Charges []Charge
}

// Charge is one payment taken from the customer's card.
type Charge struct {
	ID          string
	InvoiceID   string
	AmountCents int64
	// DuplicateOf names the charge this one repeated by mistake; empty for
	// a legitimate charge.
	DuplicateOf string
	ChargedAt   string
	// RefundID is the refund of this charge, empty if there is none.
	RefundID string
}

// Refund is money returned for a charge.
type Refund struct {
	ID          string
	ChargeID    string
	InvoiceID   string
	AmountCents int64
	Currency    string
}

// Invoice returns an invoice with its charges. It is the billing API's read,
// so it fails with a *TransientError while SetInvoiceFailures has failures
// left. (Using up a failure is a write: the count is shared by every process
// on the file.)
func (w *World) Invoice(ctx context.Context, id string) (Invoice, error) {
	var fired int
	var failed bool
	err := w.tx(ctx, func(tx *sql.Tx) (err error) {
		fired, failed, err = takeFault(ctx, tx, faultInvoiceUnavailable)
		return err
	})
	if err != nil {
		return Invoice{}, fmt.Errorf("get invoice %s: %w", id, err)
	}
	if failed {
		return Invoice{}, &TransientError{Op: "get invoice " + id, Call: fired}
	}

	inv := Invoice{ID: id}
	err = w.db.QueryRowContext(ctx, `SELECT account_id, description, amount_cents, currency, status, issued_on
		FROM invoices WHERE id = ?`, id).
		Scan(&inv.AccountID, &inv.Description, &inv.AmountCents, &inv.Currency, &inv.Status, &inv.IssuedOn)
	if errors.Is(err, sql.ErrNoRows) {
		return Invoice{}, fmt.Errorf("invoice %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Invoice{}, fmt.Errorf("get invoice %s: %w", id, err)
	}
	rows, err := w.db.QueryContext(ctx, `SELECT c.id, c.invoice_id, c.amount_cents, c.duplicate_of, c.charged_at, coalesce(r.id, '')
		FROM charges c LEFT JOIN refunds r ON r.charge_id = c.id
		WHERE c.invoice_id = ? ORDER BY c.charged_at, c.id`, id)
	if err != nil {
		return Invoice{}, fmt.Errorf("get invoice %s: charges: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var c Charge
		if err := rows.Scan(&c.ID, &c.InvoiceID, &c.AmountCents, &c.DuplicateOf, &c.ChargedAt, &c.RefundID); err != nil {
			return Invoice{}, fmt.Errorf("get invoice %s: charges: %w", id, err)
		}
		inv.Charges = append(inv.Charges, c)
	}
	if err := rows.Err(); err != nil {
		return Invoice{}, fmt.Errorf("get invoice %s: charges: %w", id, err)
	}
	return inv, nil
}

// Charge returns one charge.
func (w *World) Charge(ctx context.Context, id string) (Charge, error) {
	c, err := charge(ctx, w.db, id)
	if err != nil {
		return Charge{}, fmt.Errorf("get charge %s: %w", id, err)
	}
	return c, nil
}

// Refund returns amountCents of a charge to the customer.
//
// Refunds are keyed by charge: refunding a charge that has a refund returns
// that refund and moves no money. key is the caller's idempotency key; it is
// recorded with the refund it got, so FindRefundByKey can answer a caller
// that lost the response. An unknown charge, or an amount larger than the
// charge, is a permanent error.
func (w *World) Refund(ctx context.Context, chargeID string, amountCents int64, key string) (Refund, error) {
	if amountCents <= 0 {
		return Refund{}, fmt.Errorf("refund charge %s: amount %s USD is not positive", chargeID, formatCents(amountCents))
	}
	var (
		r       Refund
		applied bool // a new refund, not one found by key or charge
		lost    bool // the response is lost after the commit
	)
	err := w.tx(ctx, func(tx *sql.Tx) (err error) {
		if r, applied, err = refundOnce(ctx, tx, chargeID, amountCents, key); err != nil {
			return err
		}
		_, lost, err = takeFault(ctx, tx, faultLoseRefundResponse)
		return err
	})
	if err != nil {
		return Refund{}, fmt.Errorf("refund charge %s: %w", chargeID, err)
	}
	if applied {
		w.afterEffect("refund")
	}
	if lost {
		return Refund{}, fmt.Errorf("refund charge %s: no response from the payment processor: %w", chargeID, belay.ErrUnknownOutcome)
	}
	return r, nil
}

// refundOnce applies a refund unless the key or the charge already has one,
// which it returns instead. applied reports a new refund.
func refundOnce(ctx context.Context, tx *sql.Tx, chargeID string, amountCents int64, key string) (r Refund, applied bool, err error) {
	if key != "" {
		if r, found, err := findRefund(ctx, tx, refundByKey, key); err != nil || found {
			return r, false, err
		}
	}
	ch, err := charge(ctx, tx, chargeID)
	if err != nil {
		return Refund{}, false, err
	}
	if amountCents > ch.AmountCents {
		return Refund{}, false, fmt.Errorf("%w: %s USD is more than the %s USD of charge %s", ErrRefundExceedsCharge,
			formatCents(amountCents), formatCents(ch.AmountCents), chargeID)
	}
	r, found, err := findRefund(ctx, tx, refundByCharge, chargeID)
	if err != nil {
		return Refund{}, false, err
	}
	if !found {
		var id string
		err := tx.QueryRowContext(ctx, `INSERT INTO refunds (id, charge_id, amount_cents)
			SELECT printf('RF-%05d', coalesce(max(seq), 0) + 1), ?, ? FROM refunds
			RETURNING id`, chargeID, amountCents).Scan(&id)
		if err != nil {
			return Refund{}, false, err
		}
		if r, _, err = findRefund(ctx, tx, refundByID, id); err != nil {
			return Refund{}, false, err
		}
		applied = true
	}
	if key != "" {
		if _, err := tx.ExecContext(ctx, `INSERT INTO refund_keys (key, refund_id) VALUES (?, ?)`, key, r.ID); err != nil {
			return Refund{}, false, err
		}
	}
	return r, applied, nil
}

// FindRefundByKey returns the refund a request with this idempotency key
// got, if any request carried it.
func (w *World) FindRefundByKey(ctx context.Context, key string) (Refund, bool, error) {
	r, found, err := findRefund(ctx, w.db, refundByKey, key)
	if err != nil {
		return Refund{}, false, fmt.Errorf("find refund by key %s: %w", key, err)
	}
	return r, found, nil
}

// RefundsOf returns the refunds of a charge: none or one, since refunds are
// keyed by charge.
func (w *World) RefundsOf(ctx context.Context, chargeID string) ([]Refund, error) {
	r, found, err := findRefund(ctx, w.db, refundByCharge, chargeID)
	if err != nil {
		return nil, fmt.Errorf("refunds of charge %s: %w", chargeID, err)
	}
	if !found {
		return nil, nil
	}
	return []Refund{r}, nil
}

// RefundRequests counts the refund requests for a charge that carried an
// idempotency key of their own: what reached the payment processor, as it
// records it, whatever it did with them (a charge is refunded once).
func (w *World) RefundRequests(ctx context.Context, chargeID string) (int, error) {
	var n int
	err := w.db.QueryRowContext(ctx, `SELECT count(*) FROM refund_keys k
		JOIN refunds r ON r.id = k.refund_id WHERE r.charge_id = ?`, chargeID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("refund requests of charge %s: %w", chargeID, err)
	}
	return n, nil
}

// querier is what reads need from a *sql.DB or a *sql.Tx.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func charge(ctx context.Context, q querier, id string) (Charge, error) {
	c := Charge{ID: id}
	err := q.QueryRowContext(ctx, `SELECT c.invoice_id, c.amount_cents, c.duplicate_of, c.charged_at, coalesce(r.id, '')
		FROM charges c LEFT JOIN refunds r ON r.charge_id = c.id WHERE c.id = ?`, id).
		Scan(&c.InvoiceID, &c.AmountCents, &c.DuplicateOf, &c.ChargedAt, &c.RefundID)
	if errors.Is(err, sql.ErrNoRows) {
		return Charge{}, fmt.Errorf("charge %s: %w", id, ErrNotFound)
	}
	return c, err
}

// The queries of one refund, by request key, by charge and by id.
const (
	refundSelect = `SELECT r.id, r.charge_id, c.invoice_id, r.amount_cents, i.currency
		FROM refunds r JOIN charges c ON c.id = r.charge_id JOIN invoices i ON i.id = c.invoice_id `
	refundByKey    = refundSelect + `JOIN refund_keys k ON k.refund_id = r.id WHERE k.key = ?`
	refundByCharge = refundSelect + `WHERE r.charge_id = ?`
	refundByID     = refundSelect + `WHERE r.id = ?`
)

func findRefund(ctx context.Context, q querier, query, arg string) (Refund, bool, error) {
	var r Refund
	err := q.QueryRowContext(ctx, query, arg).Scan(&r.ID, &r.ChargeID, &r.InvoiceID, &r.AmountCents, &r.Currency)
	if errors.Is(err, sql.ErrNoRows) {
		return Refund{}, false, nil
	}
	if err != nil {
		return Refund{}, false, err
	}
	return r, true, nil
}

// formatCents writes an amount of cents as dollars: 28800 is "288.00".
func formatCents(cents int64) string {
	sign := ""
	if cents < 0 {
		sign, cents = "-", -cents
	}
	return fmt.Sprintf("%s%d.%02d", sign, cents/100, cents%100)
}
