package support

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// restartSQL deletes what runs did to the world.
const restartSQL = `DELETE FROM refund_keys; DELETE FROM refunds; DELETE FROM emails; DELETE FROM crm_notes; DELETE FROM faults;`

// RequestOn is DoubleChargeRequest as Ada writes it on ticket id: the same
// double charge, under another ticket.
func RequestOn(ticketID string) string {
	return strings.Replace(DoubleChargeRequest, TicketID, ticketID, 1)
}

// Restart puts the world back where Seed leaves it, before any run acted on
// it: its refunds, emails, CRM notes and armed faults are deleted. It then
// opens ticket id on Ada's account, the double charge of T-1001 again, so a
// demo plays the scenario once more on the same world under a new ticket
// (T-1002, T-1003, ...), and each run is verified against its own ticket.
// A run still acting on the world would find its effects gone: restart it
// only while none is.
func (w *World) Restart(ctx context.Context, ticketID string) error {
	if !ticketIDPattern.MatchString(ticketID) {
		return fmt.Errorf("restart world: %q is not a ticket id like %s", ticketID, TicketID)
	}
	if err := w.Seed(ctx); err != nil {
		return err
	}
	err := w.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, restartSQL); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO tickets (id, account_id, subject, body)
			SELECT ?, account_id, subject, body FROM tickets WHERE id = ?`, ticketID, TicketID)
		return err
	})
	if err != nil {
		return fmt.Errorf("restart world: %w", err)
	}
	return nil
}
