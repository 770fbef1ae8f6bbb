package support

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// Account is a customer.
type Account struct {
	ID    string
	Name  string
	Email string
	Plan  string
	// Invoices are the account's invoices, newest first, without charges.
	Invoices []Invoice
}

// Ticket is a customer's request to the desk.
type Ticket struct {
	ID        string
	AccountID string
	// Email is the address of the customer who opened the ticket.
	Email   string
	Subject string
	Body    string
}

// Note is an internal note on a ticket, visible to staff only.
type Note struct {
	ID       string
	TicketID string
	Text     string
}

// AccountByEmail returns the account of a customer with its invoices.
func (w *World) AccountByEmail(ctx context.Context, email string) (Account, error) {
	a := Account{Email: email}
	err := w.db.QueryRowContext(ctx, `SELECT id, name, plan FROM accounts WHERE email = ?`, email).
		Scan(&a.ID, &a.Name, &a.Plan)
	if errors.Is(err, sql.ErrNoRows) {
		return Account{}, fmt.Errorf("account with email %s: %w", email, ErrNotFound)
	}
	if err != nil {
		return Account{}, fmt.Errorf("get account %s: %w", email, err)
	}
	rows, err := w.db.QueryContext(ctx, `SELECT id, account_id, description, amount_cents, currency, status, issued_on
		FROM invoices WHERE account_id = ? ORDER BY issued_on DESC, id DESC`, a.ID)
	if err != nil {
		return Account{}, fmt.Errorf("get account %s: invoices: %w", email, err)
	}
	defer rows.Close()
	for rows.Next() {
		var inv Invoice
		if err := rows.Scan(&inv.ID, &inv.AccountID, &inv.Description, &inv.AmountCents, &inv.Currency, &inv.Status, &inv.IssuedOn); err != nil {
			return Account{}, fmt.Errorf("get account %s: invoices: %w", email, err)
		}
		a.Invoices = append(a.Invoices, inv)
	}
	if err := rows.Err(); err != nil {
		return Account{}, fmt.Errorf("get account %s: invoices: %w", email, err)
	}
	return a, nil
}

// Ticket returns a ticket.
func (w *World) Ticket(ctx context.Context, id string) (Ticket, error) {
	t := Ticket{ID: id}
	err := w.db.QueryRowContext(ctx, `SELECT t.account_id, a.email, t.subject, t.body
		FROM tickets t JOIN accounts a ON a.id = t.account_id WHERE t.id = ?`, id).
		Scan(&t.AccountID, &t.Email, &t.Subject, &t.Body)
	if errors.Is(err, sql.ErrNoRows) {
		return Ticket{}, fmt.Errorf("ticket %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Ticket{}, fmt.Errorf("get ticket %s: %w", id, err)
	}
	return t, nil
}

// AddNote adds an internal note to a ticket. The CRM knows nothing of
// idempotency keys: every call adds a note, so a caller that lost the answer
// must look with FindNote before calling again.
func (w *World) AddNote(ctx context.Context, ticketID, text string) (Note, error) {
	if strings.TrimSpace(text) == "" {
		return Note{}, fmt.Errorf("add note to ticket %s: the text is empty", ticketID)
	}
	n := Note{TicketID: ticketID, Text: text}
	err := w.tx(ctx, func(tx *sql.Tx) error {
		var exists bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM tickets WHERE id = ?)`, ticketID).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return ErrNotFound
		}
		return tx.QueryRowContext(ctx, `INSERT INTO crm_notes (id, ticket_id, text)
			SELECT printf('NOTE-%05d', coalesce(max(seq), 0) + 1), ?, ? FROM crm_notes
			RETURNING id`, ticketID, text).Scan(&n.ID)
	})
	if err != nil {
		return Note{}, fmt.Errorf("add note to ticket %s: %w", ticketID, err)
	}
	w.afterEffect("note")
	return n, nil
}

// FindNote returns the latest note on a ticket whose text is text, ignoring
// surrounding space: how a caller finds out whether an AddNote whose answer
// it lost went through.
func (w *World) FindNote(ctx context.Context, ticketID, text string) (Note, bool, error) {
	n := Note{TicketID: ticketID}
	err := w.db.QueryRowContext(ctx, `SELECT id, text FROM crm_notes
		WHERE ticket_id = ? AND trim(text, ?) = ? ORDER BY seq DESC LIMIT 1`, ticketID, spaces, strings.Trim(text, spaces)).
		Scan(&n.ID, &n.Text)
	if errors.Is(err, sql.ErrNoRows) {
		return Note{}, false, nil
	}
	if err != nil {
		return Note{}, false, fmt.Errorf("find note on ticket %s: %w", ticketID, err)
	}
	return n, true, nil
}

// spaces are what FindNote ignores around a note's text.
const spaces = " \t\r\n"

// Notes returns the notes on a ticket, oldest first.
func (w *World) Notes(ctx context.Context, ticketID string) ([]Note, error) {
	rows, err := w.db.QueryContext(ctx, `SELECT id, text FROM crm_notes WHERE ticket_id = ? ORDER BY seq`, ticketID)
	if err != nil {
		return nil, fmt.Errorf("notes on ticket %s: %w", ticketID, err)
	}
	defer rows.Close()
	var notes []Note
	for rows.Next() {
		n := Note{TicketID: ticketID}
		if err := rows.Scan(&n.ID, &n.Text); err != nil {
			return nil, fmt.Errorf("notes on ticket %s: %w", ticketID, err)
		}
		notes = append(notes, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("notes on ticket %s: %w", ticketID, err)
	}
	return notes, nil
}
