package support

import (
	"strings"
	"testing"
)

// Restart puts the world back as Seed leaves it and opens the new ticket on
// Ada's account: the double charge can be refunded again, under it.
func TestRestartOpensANewTicketOnAFreshWorld(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ctx := t.Context()
	if _, err := w.Refund(ctx, "CH-2", 28800, "k-1"); err != nil {
		t.Fatal(err)
	}
	if err := w.SetLoseRefundResponses(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Restart(ctx, "T-1002"); err != nil {
		t.Fatal(err)
	}
	if c := mustCounts(t, w); c != (Counts{}) {
		t.Errorf("after a restart the world holds %+v; want nothing a run did", c)
	}
	ticket, err := w.Ticket(ctx, "T-1002")
	if err != nil || ticket.Email != "ada@example.com" {
		t.Fatalf("ticket T-1002: %+v, %v; want Ada's", ticket, err)
	}
	// The armed fault went with the rest: the refund's answer comes back.
	if r, err := w.Refund(ctx, "CH-2", 28800, "k-2"); err != nil || r.ChargeID != "CH-2" {
		t.Errorf("a refund after the restart: %+v, %v", r, err)
	}
	if got := RequestOn("T-1002"); !strings.HasSuffix(got, "ticket T-1002") || strings.Contains(got, TicketID) {
		t.Errorf("RequestOn(T-1002) = %q", got)
	}
	if err := w.Restart(ctx, "1002; DROP TABLE tickets"); err == nil {
		t.Error("a restart on something that is not a ticket id was accepted")
	}
}
