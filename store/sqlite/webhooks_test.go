package sqlite

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// TestFanOutBacklog: a backlog larger than one fan-out batch goes out over
// several claims, every message to its webhook once.
func TestFanOutBacklog(t *testing.T) {
	t.Parallel()
	s := openTest(t, filepath.Join(t.TempDir(), "belay.db"))
	ctx := t.Context()
	if err := s.CreateWebhook(ctx, store.Webhook{ID: "wh", Tenant: "t", URL: "https://example.com", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	r := claimOne(t, s, "r1")
	msgs := make([]store.OutboxMessage, fanOutBatch+fanOutBatch/2)
	for i := range msgs {
		msgs[i] = store.OutboxMessage{Kind: "escalation", Payload: json.RawMessage(`{}`)}
	}
	err := s.Checkpoint(ctx, store.CheckpointParams{
		Fence: store.Fence{RunID: r.ID, Owner: r.LeaseOwner, Epoch: r.LeaseEpoch}, Now: t0,
		Run: store.RunUpdate{Status: store.StatusDone}, Outbox: msgs,
	})
	if err != nil {
		t.Fatal(err)
	}

	claim := func() int {
		ds, err := s.ClaimDeliveries(ctx, store.ClaimDeliveriesParams{Owner: "d", Now: t0, TTL: time.Hour, Limit: len(msgs)})
		if err != nil {
			t.Fatal(err)
		}
		return len(ds)
	}
	if n := claim(); n != fanOutBatch {
		t.Errorf("first claim: %d deliveries, want %d", n, fanOutBatch)
	}
	if n := claim(); n != len(msgs)-fanOutBatch {
		t.Errorf("second claim: %d deliveries, want %d", n, len(msgs)-fanOutBatch)
	}
	if n := claim(); n != 0 {
		t.Errorf("third claim: %d deliveries, want none", n)
	}
	out, err := s.Outbox(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range out {
		if m.DeliveredAt.IsZero() {
			t.Fatalf("outbox message %d not fanned out", m.ID)
		}
	}
}
