package postgres

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// Senders claim while runs write notifications and one of two webhooks is
// disabled halfway: every message reaches the webhook that stays once, each
// delivery is claimed at most once, and none of the disabled webhook's is
// left pending, however the fan-outs and the disabling interleaved.
func TestClaimDeliveriesConcurrently(t *testing.T) {
	t.Parallel()
	s := openTest(t, Config{MaxConns: 8})
	ctx := t.Context()
	const (
		senders  = 4
		runs     = 60
		perRun   = 5
		disabled = runs / 2
	)
	for _, id := range []string{"wh-stays", "wh-disabled"} {
		if err := s.CreateWebhook(ctx, store.Webhook{ID: id, Tenant: "t", URL: "https://example.com/" + id, Secret: "s", CreatedAt: t0}); err != nil {
			t.Fatal(err)
		}
	}

	var (
		wg      sync.WaitGroup
		done    atomic.Bool
		claimed = make([][]string, senders)
	)
	for w := range senders {
		wg.Go(func() {
			for {
				last := done.Load()
				// Leased for an hour and never settled: nothing is claimed
				// twice unless two senders take the same delivery.
				ds, err := s.ClaimDeliveries(ctx, store.ClaimDeliveriesParams{Owner: fmt.Sprintf("s%d", w), Now: t0, TTL: time.Hour, Limit: 7})
				if err != nil {
					t.Errorf("ClaimDeliveries: %v", err)
					return
				}
				for _, d := range ds {
					claimed[w] = append(claimed[w], d.ID)
				}
				if len(ds) == 0 && last {
					return
				}
			}
		})
	}
	for i := range runs {
		if i == disabled {
			if err := s.DisableWebhook(ctx, "t", "wh-disabled", t0); err != nil {
				t.Fatal(err)
			}
		}
		r := claimOne(t, s, fmt.Sprintf("run-%02d", i))
		msgs := make([]store.OutboxMessage, perRun)
		for j := range msgs {
			msgs[j] = store.OutboxMessage{Kind: "k", Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, j))}
		}
		if err := s.Checkpoint(ctx, store.CheckpointParams{Fence: store.Fence{RunID: r.ID, Owner: r.LeaseOwner, Epoch: r.LeaseEpoch},
			Now: t0, Run: store.RunUpdate{Status: store.StatusDone}, Outbox: msgs}); err != nil {
			t.Fatal(err)
		}
	}
	done.Store(true)
	wg.Wait()

	var all []string
	for _, c := range claimed {
		all = append(all, c...)
	}
	slices.Sort(all)
	if n := len(slices.Compact(slices.Clone(all))); n != len(all) {
		t.Errorf("%d deliveries claimed, %d distinct; want each at most once", len(all), n)
	}
	stays, err := s.Deliveries(ctx, store.ListDeliveriesParams{WebhookID: "wh-stays"})
	if err != nil {
		t.Fatal(err)
	}
	if len(stays) != runs*perRun {
		t.Errorf("%d deliveries to the webhook that stays, want %d", len(stays), runs*perRun)
	}
	for _, d := range stays {
		if d.Attempts != 1 || !slices.Contains(all, d.ID) {
			t.Errorf("delivery %s: %d attempts, claimed %v; want claimed once", d.ID, d.Attempts, slices.Contains(all, d.ID))
		}
	}
	gone, err := s.Deliveries(ctx, store.ListDeliveriesParams{WebhookID: "wh-disabled"})
	if err != nil {
		t.Fatal(err)
	}
	if len(gone) > disabled*perRun {
		t.Errorf("%d deliveries to the disabled webhook, want at most the %d written before", len(gone), disabled*perRun)
	}
	for _, d := range gone {
		if d.State != store.DeliveryFailed || d.LastError != "webhook disabled" {
			t.Errorf("delivery %s to the disabled webhook: %s (%q)", d.ID, d.State, d.LastError)
		}
	}
}
