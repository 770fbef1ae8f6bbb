package sqlrow

import "github.com/belayrun/belay/store"

type outboxRaw struct {
	created, delivered int64
}

func outboxColumns(m *store.OutboxMessage, x *outboxRaw, c *columns) {
	c.add("id", &m.ID)
	c.add("tenant", &m.Tenant)
	c.add("run_id", &m.RunID)
	c.add("kind", &m.Kind)
	c.add("payload", (*[]byte)(&m.Payload))
	c.add("created_at", &x.created)
	c.add("delivered_at", &x.delivered)
	c.add("attempts", &m.Attempts)
}

func decodeOutbox(m *store.OutboxMessage, x *outboxRaw) error {
	m.CreatedAt, m.DeliveredAt = Time(x.created), Time(x.delivered)
	return nil
}

// Outbox reads the columns of a "-- columns: outbox" query.
func Outbox(row Scanner) (store.OutboxMessage, error) {
	return scanRow(row, new(outboxRaw), outboxColumns, decodeOutbox)
}

type deliveryRaw struct {
	next, created, delivered int64
}

// deliveryColumns are the delivery's, joined with its message's payload and
// its webhook's URL and secret.
func deliveryColumns(d *store.Delivery, x *deliveryRaw, c *columns) {
	c.add("id", &d.ID)
	c.add("tenant", &d.Tenant)
	c.add("webhook_id", &d.WebhookID)
	c.add("outbox_id", &d.OutboxID)
	c.add("run_id", &d.RunID)
	c.add("kind", &d.Kind)
	c.add("payload", (*[]byte)(&d.Payload))
	c.add("url", &d.URL)
	c.add("secret", &d.Secret)
	c.add("state", (*string)(&d.State))
	c.add("attempts", &d.Attempts)
	c.add("next_attempt_at", &x.next)
	c.add("last_error", &d.LastError)
	c.add("created_at", &x.created)
	c.add("delivered_at", &x.delivered)
}

func decodeDelivery(d *store.Delivery, x *deliveryRaw) error {
	d.NextAttemptAt, d.CreatedAt, d.DeliveredAt = Time(x.next), Time(x.created), Time(x.delivered)
	return nil
}

// Delivery reads the columns of a "-- columns: delivery" query.
func Delivery(row Scanner) (store.Delivery, error) {
	return scanRow(row, new(deliveryRaw), deliveryColumns, decodeDelivery)
}
