package postgres

import (
	"context"
	"fmt"
	"time"

	_ "embed"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/webhook_insert.sql
	webhookInsertSQL string
	//go:embed query/webhook_list.sql
	webhookListSQL string
	//go:embed query/webhook_disable.sql
	webhookDisableSQL string
	//go:embed query/delivery_fail_webhook.sql
	deliveryFailWebhookSQL string
	//go:embed query/delivery_fan_out.sql
	deliveryFanOutSQL string
	//go:embed query/delivery_claim.sql
	deliveryClaimSQL string
	//go:embed query/delivery_settle.sql
	deliverySettleSQL string
	//go:embed query/delivery_list.sql
	deliveryListSQL string
)

// CreateWebhook inserts an endpoint, as its tenant. An id that exists in any
// tenant fails.
func (s *Store) CreateWebhook(ctx context.Context, w store.Webhook) error {
	kinds := w.Kinds
	if kinds == nil {
		kinds = []string{} // NULL is not an empty list
	}
	b := s.batch(w.Tenant)
	b.Queue(webhookInsertSQL, namedArgs{
		"id":          w.ID,
		"tenant":      w.Tenant,
		"url":         w.URL,
		"secret":      w.Secret,
		"kinds":       kinds,
		"created_at":  sqlrow.Nanos(w.CreatedAt),
		"disabled_at": sqlrow.Nanos(w.DisabledAt),
	})
	if err := s.send(ctx, b); err != nil {
		return fmt.Errorf("create webhook %s: %w", w.ID, err)
	}
	return nil
}

// Webhooks lists a tenant's endpoints in creation order, as the tenant. An
// empty tenant matches any.
func (s *Store) Webhooks(ctx context.Context, tenant string) ([]store.Webhook, error) {
	var ws []store.Webhook
	b := s.batch(tenant)
	b.Queue(webhookListSQL, namedArgs{"tenant": tenant}).Query(collect(&ws, scanWebhook))
	if err := s.send(ctx, b); err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return ws, nil
}

// DisableWebhook stops deliveries to an endpoint and fails its pending ones,
// as its tenant, in one implicit transaction.
func (s *Store) DisableWebhook(ctx context.Context, tenant, id string, now time.Time) error {
	b := s.batch(tenant)
	b.Queue(webhookDisableSQL, namedArgs{"id": id, "tenant": tenant, "now": sqlrow.Nanos(now)})
	b.Queue(deliveryFailWebhookSQL, namedArgs{"webhook_id": id})
	if err := s.send(ctx, b); err != nil {
		return fmt.Errorf("disable webhook %s: %w", id, err)
	}
	return nil
}

// ClaimDeliveries fans undispatched outbox messages out to the webhooks of
// their tenant, then leases up to Limit due deliveries to an owner, across
// tenants (as the owner), in one implicit transaction and one round trip.
// Senders claiming at once skip what another holds and never wait for each
// other.
func (s *Store) ClaimDeliveries(ctx context.Context, p store.ClaimDeliveriesParams) ([]store.Delivery, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	var ds []store.Delivery
	b := s.batch("")
	b.Queue(deliveryFanOutSQL, namedArgs{"now": sqlrow.Nanos(p.Now)})
	b.Queue(deliveryClaimSQL, namedArgs{
		"owner":   p.Owner,
		"now":     sqlrow.Nanos(p.Now),
		"expires": sqlrow.Nanos(p.Now.Add(p.TTL)),
		"limit":   p.Limit,
	}).Query(collect(&ds, sqlrow.Delivery))
	if err := s.send(ctx, b); err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	return ds, nil
}

// SettleDelivery records one attempt's outcome, as the owner. A delivery
// settled since or leased to another owner is left as it is, without error.
func (s *Store) SettleDelivery(ctx context.Context, p store.SettleDeliveryParams) error {
	_, err := s.pool.Exec(ctx, deliverySettleSQL, namedArgs{
		"id":              p.ID,
		"owner":           p.Owner,
		"state":           string(p.State),
		"next_attempt_at": sqlrow.Nanos(p.NextAttemptAt),
		"error":           p.Error,
		"now":             sqlrow.Nanos(p.Now),
	})
	if err != nil {
		return fmt.Errorf("settle delivery %s: %w", p.ID, err)
	}
	return nil
}

// Deliveries lists deliveries in creation order, as the tenant when one is
// given.
func (s *Store) Deliveries(ctx context.Context, p store.ListDeliveriesParams) ([]store.Delivery, error) {
	var limit any // null: no limit
	if p.Limit > 0 {
		limit = p.Limit
	}
	var ds []store.Delivery
	b := s.batch(p.Tenant)
	b.Queue(deliveryListSQL, namedArgs{
		"tenant":     p.Tenant,
		"webhook_id": p.WebhookID,
		"run_id":     p.RunID,
		"limit":      limit,
	}).Query(collect(&ds, sqlrow.Delivery))
	if err := s.send(ctx, b); err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	return ds, nil
}
