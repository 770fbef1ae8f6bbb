package support

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// Email is a message the mailbox sent.
type Email struct {
	ID string
	// Key is the idempotency key it was sent under, empty if none.
	Key     string
	To      string
	Subject string
	Body    string
}

const emailSelect = `SELECT id, coalesce(idempotency_key, ''), to_addr, subject, body FROM emails `

// SendEmail sends a message. The mailbox honours key: a second message under
// a key already used is not sent; the first one is returned. An empty key
// sends every time.
func (w *World) SendEmail(ctx context.Context, key, to, subject, body string) (Email, error) {
	if !strings.Contains(to, "@") {
		return Email{}, fmt.Errorf("send email: recipient %q is not an email address", to)
	}
	var e Email
	sent := false
	err := w.tx(ctx, func(tx *sql.Tx) error {
		if key != "" {
			err := scanEmail(tx.QueryRowContext(ctx, emailSelect+`WHERE idempotency_key = ?`, key), &e)
			if err == nil || !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		sent = true
		return scanEmail(tx.QueryRowContext(ctx, `INSERT INTO emails (id, idempotency_key, to_addr, subject, body)
			SELECT printf('EM-%05d', coalesce(max(seq), 0) + 1), nullif(?, ''), ?, ?, ? FROM emails
			RETURNING id, coalesce(idempotency_key, ''), to_addr, subject, body`, key, to, subject, body), &e)
	})
	if err != nil {
		return Email{}, fmt.Errorf("send email to %s: %w", to, err)
	}
	if sent {
		w.afterEffect("email")
	}
	return e, nil
}

// Emails returns the messages sent to an address, oldest first.
func (w *World) Emails(ctx context.Context, to string) ([]Email, error) {
	rows, err := w.db.QueryContext(ctx, emailSelect+`WHERE to_addr = ? ORDER BY seq`, to)
	if err != nil {
		return nil, fmt.Errorf("emails to %s: %w", to, err)
	}
	defer rows.Close()
	var emails []Email
	for rows.Next() {
		var e Email
		if err := scanEmail(rows, &e); err != nil {
			return nil, fmt.Errorf("emails to %s: %w", to, err)
		}
		emails = append(emails, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("emails to %s: %w", to, err)
	}
	return emails, nil
}

func scanEmail(row interface{ Scan(...any) error }, e *Email) error {
	return row.Scan(&e.ID, &e.Key, &e.To, &e.Subject, &e.Body)
}
