package support

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
)

// SeededTicket is one of the tickets SeedTickets adds: a customer charged
// twice for one invoice, like T-1001, with amounts that differ from ticket
// to ticket.
type SeededTicket struct {
	ID        string // T-2000, T-2001, ...
	AccountID string
	Email     string
	InvoiceID string
	// ChargeID is the legitimate charge; DuplicateChargeID repeats it and is
	// the one to refund.
	ChargeID          string
	DuplicateChargeID string
	AmountCents       int64
}

// TicketSeed returns ticket i of SeedTickets, for i from 0. Every third
// ticket's duplicate is at most 50 USD, which the support policy refunds
// without asking; the others need a person's approval, and some of those
// are above the 300 USD a run may refund on one approval rule.
func TicketSeed(i int) SeededTicket {
	amount := int64(5100 + (i*4391)%35000) // 51.00 to 400.99 USD
	if i%3 == 0 {
		amount = int64(1000 + (i*1237)%4000) // 10.00 to 49.99 USD
	}
	return SeededTicket{
		ID:                fmt.Sprintf("T-%d", 2000+i),
		AccountID:         fmt.Sprintf("ACC-%d", 2000+i),
		Email:             fmt.Sprintf("cust%d@example.com", i),
		InvoiceID:         fmt.Sprintf("INV-2026-%d", i),
		ChargeID:          fmt.Sprintf("CH-%d-1", i),
		DuplicateChargeID: fmt.Sprintf("CH-%d-2", i),
		AmountCents:       amount,
	}
}

// Input is the customer's message that opens a run on the ticket: it names
// the customer, the invoice and the ticket, as Script reads them.
func (t SeededTicket) Input() string {
	return fmt.Sprintf("Hi, I was charged twice for invoice %s. Can you fix it? - %s, ticket %s", t.InvoiceID, t.Email, t.ID)
}

// SeedTickets seeds the scenario (see Seed) and n more tickets like T-1001,
// TicketSeed(0) to TicketSeed(n-1), each with an account, an invoice and its
// two charges. Like Seed, it is safe to repeat and never undoes what a run
// did.
func (w *World) SeedTickets(ctx context.Context, n int) error {
	if err := w.Seed(ctx); err != nil {
		return err
	}
	err := w.tx(ctx, func(tx *sql.Tx) error {
		for i := range n {
			t := TicketSeed(i)
			for _, st := range []struct {
				query string
				args  []any
			}{
				{`INSERT OR IGNORE INTO accounts (id, name, email, plan) VALUES (?, ?, ?, 'Team, billed monthly')`,
					[]any{t.AccountID, fmt.Sprintf("Customer %d", i), t.Email}},
				{`INSERT OR IGNORE INTO tickets (id, account_id, subject, body) VALUES (?, ?, 'Charged twice', ?)`,
					[]any{t.ID, t.AccountID, fmt.Sprintf("Hi, I was charged twice for invoice %s. Please refund one. - %s", t.InvoiceID, t.Email)}},
				{`INSERT OR IGNORE INTO invoices (id, account_id, description, amount_cents, currency, status, issued_on)
					VALUES (?, ?, 'Team plan, monthly subscription', ?, 'USD', 'paid', '2026-03-02')`,
					[]any{t.InvoiceID, t.AccountID, t.AmountCents}},
				{`INSERT OR IGNORE INTO charges (id, invoice_id, amount_cents, duplicate_of, charged_at) VALUES
					(?, ?, ?, '', '2026-03-02T09:14:03Z'), (?, ?, ?, ?, '2026-03-02T09:14:05Z')`,
					[]any{t.ChargeID, t.InvoiceID, t.AmountCents, t.DuplicateChargeID, t.InvoiceID, t.AmountCents, t.ChargeID}},
			} {
				if _, err := tx.ExecContext(ctx, st.query, st.args...); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("seed %d tickets: %w", n, err)
	}
	return nil
}

// TicketState is what the world holds for one ticket: what a run on it did.
type TicketState struct {
	// Email is the address of the ticket's customer.
	Email string
	// Duplicates are the charges on the customer's invoices that repeat
	// another; Originals the legitimate ones.
	Duplicates []Charge
	Originals  []Charge
	// Refunds are the refunds of the customer's charges, original or not.
	Refunds []Refund
	Emails  []Email
	Notes   []Note
}

// TicketState reads what the world holds for a ticket. It is a read for
// checks: it injects no faults and uses none up.
func (w *World) TicketState(ctx context.Context, ticketID string) (TicketState, error) {
	t, err := w.Ticket(ctx, ticketID)
	if err != nil {
		return TicketState{}, err
	}
	s := TicketState{Email: t.Email}
	rows, err := w.db.QueryContext(ctx, chargesSelect+`WHERE i.account_id = ? ORDER BY c.charged_at, c.id`, t.AccountID)
	if err != nil {
		return TicketState{}, fmt.Errorf("state of ticket %s: %w", ticketID, err)
	}
	err = scanCharges(rows, func(_ string, c Charge, r Refund) {
		s.addCharge(c, r)
	})
	if err != nil {
		return TicketState{}, fmt.Errorf("state of ticket %s: %w", ticketID, err)
	}
	if s.Emails, err = w.Emails(ctx, t.Email); err != nil {
		return TicketState{}, err
	}
	if s.Notes, err = w.Notes(ctx, ticketID); err != nil {
		return TicketState{}, err
	}
	return s, nil
}

// TicketStates reads what the world holds for every ticket, by ticket id,
// in four queries: for checks after hundreds of runs.
func (w *World) TicketStates(ctx context.Context) (map[string]*TicketState, error) {
	states := make(map[string]*TicketState)
	byAccount := make(map[string][]*TicketState)
	byEmail := make(map[string][]*TicketState)
	rows, err := w.db.QueryContext(ctx, `SELECT t.id, t.account_id, a.email FROM tickets t JOIN accounts a ON a.id = t.account_id`)
	if err != nil {
		return nil, fmt.Errorf("ticket states: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, account, email string
		if err := rows.Scan(&id, &account, &email); err != nil {
			return nil, fmt.Errorf("ticket states: %w", err)
		}
		s := &TicketState{Email: email}
		states[id] = s
		byAccount[account] = append(byAccount[account], s)
		byEmail[email] = append(byEmail[email], s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ticket states: %w", err)
	}

	if rows, err = w.db.QueryContext(ctx, chargesSelect+`ORDER BY c.charged_at, c.id`); err != nil {
		return nil, fmt.Errorf("ticket states: %w", err)
	}
	err = scanCharges(rows, func(account string, c Charge, r Refund) {
		for _, s := range byAccount[account] {
			s.addCharge(c, r)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("ticket states: %w", err)
	}

	if rows, err = w.db.QueryContext(ctx, emailSelect+`ORDER BY seq`); err != nil {
		return nil, fmt.Errorf("ticket states: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var e Email
		if err := scanEmail(rows, &e); err != nil {
			return nil, fmt.Errorf("ticket states: %w", err)
		}
		for _, s := range byEmail[e.To] {
			s.Emails = append(s.Emails, e)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ticket states: %w", err)
	}

	if rows, err = w.db.QueryContext(ctx, `SELECT id, ticket_id, text FROM crm_notes ORDER BY seq`); err != nil {
		return nil, fmt.Errorf("ticket states: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var n Note
		if err := rows.Scan(&n.ID, &n.TicketID, &n.Text); err != nil {
			return nil, fmt.Errorf("ticket states: %w", err)
		}
		if s, ok := states[n.TicketID]; ok {
			s.Notes = append(s.Notes, n)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ticket states: %w", err)
	}
	return states, nil
}

// chargesSelect reads charges with their account and refund, for
// scanCharges.
const chargesSelect = `SELECT i.account_id, c.id, c.invoice_id, c.amount_cents, c.duplicate_of, c.charged_at,
		coalesce(r.id, ''), coalesce(r.amount_cents, 0), i.currency
	FROM charges c JOIN invoices i ON i.id = c.invoice_id LEFT JOIN refunds r ON r.charge_id = c.id `

// scanCharges calls fn with each row of a chargesSelect query, and closes
// rows. The refund is zero if the charge has none.
func scanCharges(rows *sql.Rows, fn func(account string, c Charge, r Refund)) error {
	defer rows.Close()
	for rows.Next() {
		var account string
		var c Charge
		r := Refund{}
		if err := rows.Scan(&account, &c.ID, &c.InvoiceID, &c.AmountCents, &c.DuplicateOf, &c.ChargedAt,
			&c.RefundID, &r.AmountCents, &r.Currency); err != nil {
			return err
		}
		if c.RefundID != "" {
			r.ID, r.ChargeID, r.InvoiceID = c.RefundID, c.ID, c.InvoiceID
		} else {
			r = Refund{}
		}
		fn(account, c, r)
	}
	return rows.Err()
}

// addCharge files a charge, and its refund if it has one.
func (s *TicketState) addCharge(c Charge, r Refund) {
	if c.DuplicateOf != "" {
		s.Duplicates = append(s.Duplicates, c)
	} else {
		s.Originals = append(s.Originals, c)
	}
	if r.ID != "" {
		s.Refunds = append(s.Refunds, r)
	}
}

// ticketIDPattern is a whole ticket id, like T-1001.
var ticketIDPattern = regexp.MustCompile(`^T-\d+$`)

// ticketOf is the ticket a run works on: its client request id when that is
// a ticket id, as it is for runs started per ticket, else the scenario's
// T-1001.
func ticketOf(clientRequestID string) string {
	if ticketIDPattern.MatchString(clientRequestID) {
		return clientRequestID
	}
	return TicketID
}
