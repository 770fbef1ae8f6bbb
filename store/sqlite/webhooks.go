package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
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
	//go:embed query/outbox_dispatch.sql
	outboxDispatchSQL string
	//go:embed query/delivery_any.sql
	deliveryAnySQL string
	//go:embed query/delivery_due.sql
	deliveryDueSQL string
	//go:embed query/delivery_lease.sql
	deliveryLeaseSQL string
	//go:embed query/delivery_settle.sql
	deliverySettleSQL string
	//go:embed query/delivery_list.sql
	deliveryListSQL string
)

// fanOutBatch bounds the outbox messages one claim fans out, so that a
// backlog does not hold the writer's transaction, and the checkpoints
// sharing it, for long. The rest go out with the next claims.
const fanOutBatch = 1000

// CreateWebhook inserts an endpoint; an ID that exists fails.
func (s *Store) CreateWebhook(ctx context.Context, w store.Webhook) error {
	kinds := w.Kinds
	if kinds == nil {
		kinds = []string{} // "[]", never "null": the fan-out matches on it
	}
	b, err := json.Marshal(kinds)
	if err != nil {
		return fmt.Errorf("create webhook %s: %w", w.ID, err)
	}
	err = s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		_, err := tx.ExecContext(ctx, webhookInsertSQL,
			sql.Named("id", w.ID),
			sql.Named("tenant", w.Tenant),
			sql.Named("url", w.URL),
			sql.Named("secret", w.Secret),
			sql.Named("kinds", string(b)),
			sql.Named("created_at", sqlrow.Nanos(w.CreatedAt)),
		)
		return err
	})
	if err != nil {
		return fmt.Errorf("create webhook %s: %w", w.ID, err)
	}
	return nil
}

// Webhooks lists a tenant's endpoints in creation order, disabled ones
// included.
func (s *Store) Webhooks(ctx context.Context, tenant string) ([]store.Webhook, error) {
	ws, err := readAll(ctx, s.read, scanWebhook, webhookListSQL, sql.Named("tenant", tenant))
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	return ws, nil
}

// DisableWebhook stops deliveries to an endpoint of the tenant and fails
// those still pending. The tenant must match exactly.
func (s *Store) DisableWebhook(ctx context.Context, tenant, id string, now time.Time) error {
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		res, err := tx.ExecContext(ctx, webhookDisableSQL,
			sql.Named("id", id),
			sql.Named("tenant", tenant),
			sql.Named("now", sqlrow.Nanos(now)),
		)
		if err != nil {
			return err
		}
		if err := mustFind(res); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, deliveryFailWebhookSQL, sql.Named("webhook_id", id))
		return err
	})
	if err != nil {
		return fmt.Errorf("disable webhook %s: %w", id, err)
	}
	return nil
}

// ClaimDeliveries fans the oldest undispatched outbox messages out to the
// webhooks enabled now, then leases up to Limit due deliveries, oldest
// first. A message is fanned out once, to the webhooks enabled then.
func (s *Store) ClaimDeliveries(ctx context.Context, p store.ClaimDeliveriesParams) ([]store.Delivery, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	// Nothing to do is the common case: a read finds it out without taking
	// a turn of the writer, which the runs' checkpoints share.
	var work bool
	if err := s.read.QueryRowContext(ctx, deliveryAnySQL, sql.Named("now", sqlrow.Nanos(p.Now))).Scan(&work); err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	if !work {
		return nil, nil
	}
	var ds []store.Delivery
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		ds = nil // a batch may run twice
		if _, err := tx.ExecContext(ctx, deliveryFanOutSQL,
			sql.Named("batch", fanOutBatch),
			sql.Named("now", sqlrow.Nanos(p.Now)),
		); err != nil {
			return fmt.Errorf("fan out: %w", err)
		}
		if _, err := tx.ExecContext(ctx, outboxDispatchSQL,
			sql.Named("batch", fanOutBatch),
			sql.Named("now", sqlrow.Nanos(p.Now)),
		); err != nil {
			return fmt.Errorf("fan out: %w", err)
		}
		var err error
		ds, err = txAll(ctx, tx, sqlrow.Delivery, deliveryDueSQL,
			sql.Named("now", sqlrow.Nanos(p.Now)),
			sql.Named("limit", p.Limit),
		)
		if err != nil {
			return err
		}
		for i := range ds {
			if err := tx.QueryRowContext(ctx, deliveryLeaseSQL,
				sql.Named("id", ds[i].ID),
				sql.Named("owner", p.Owner),
				sql.Named("expires", sqlrow.Nanos(p.Now.Add(p.TTL))),
			).Scan(&ds[i].Attempts); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim deliveries: %w", err)
	}
	return ds, nil
}

// SettleDelivery records one attempt's outcome. A delivery no longer
// pending, or leased to another owner, is left as it is.
func (s *Store) SettleDelivery(ctx context.Context, p store.SettleDeliveryParams) error {
	switch p.State {
	case store.DeliveryPending, store.DeliveryDelivered, store.DeliveryFailed:
	default:
		return fmt.Errorf("settle delivery %s: state %q", p.ID, p.State)
	}
	err := s.writer.do(ctx, 0, func(ctx context.Context, tx *writeTx) error {
		_, err := tx.ExecContext(ctx, deliverySettleSQL,
			sql.Named("id", p.ID),
			sql.Named("owner", p.Owner),
			sql.Named("state", string(p.State)),
			sql.Named("next_attempt_at", sqlrow.Nanos(p.NextAttemptAt)),
			sql.Named("error", p.Error),
			sql.Named("now", sqlrow.Nanos(p.Now)),
		)
		return err
	})
	if err != nil {
		return fmt.Errorf("settle delivery %s: %w", p.ID, err)
	}
	return nil
}

// Deliveries lists deliveries in creation order. Zero fields of p do not
// filter.
func (s *Store) Deliveries(ctx context.Context, p store.ListDeliveriesParams) ([]store.Delivery, error) {
	limit := int64(p.Limit)
	if limit <= 0 {
		limit = -1
	}
	ds, err := readAll(ctx, s.read, sqlrow.Delivery, deliveryListSQL,
		sql.Named("tenant", p.Tenant),
		sql.Named("webhook_id", p.WebhookID),
		sql.Named("run_id", p.RunID),
		sql.Named("limit", limit),
	)
	if err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	return ds, nil
}

// kindList reads a webhook's kinds, which SQLite stores as a JSON array;
// none is nil.
type kindList []byte

func (l *kindList) Dest() any { return (*[]byte)(l) }

func (l *kindList) Strings() ([]string, error) {
	var kinds []string
	if err := json.Unmarshal(*l, &kinds); err != nil {
		return nil, err
	}
	if len(kinds) == 0 {
		return nil, nil
	}
	return kinds, nil
}

func scanWebhook(row sqlrow.Scanner) (store.Webhook, error) {
	return sqlrow.Webhook(row, new(kindList))
}
