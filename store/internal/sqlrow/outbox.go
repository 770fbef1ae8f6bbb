package sqlrow

import "github.com/belayrun/belay/store"

type outboxRaw struct {
	created, delivered int64
}

func outboxColumns(m *store.OutboxMessage, x *outboxRaw) []column {
	return []column{
		{"id", &m.ID},
		{"tenant", &m.Tenant},
		{"run_id", &m.RunID},
		{"kind", &m.Kind},
		{"payload", (*[]byte)(&m.Payload)},
		{"created_at", &x.created},
		{"delivered_at", &x.delivered},
		{"attempts", &m.Attempts},
	}
}

// Outbox reads the columns of a "-- columns: outbox" query.
func Outbox(row Scanner) (store.OutboxMessage, error) {
	var (
		m store.OutboxMessage
		x outboxRaw
	)
	if err := scan(row, outboxColumns(&m, &x)); err != nil {
		return store.OutboxMessage{}, err
	}
	m.CreatedAt, m.DeliveredAt = Time(x.created), Time(x.delivered)
	return m, nil
}

type deliveryRaw struct {
	next, created, delivered int64
}

// deliveryColumns are the delivery's, joined with its message's payload and
// its webhook's URL and secret.
func deliveryColumns(d *store.Delivery, x *deliveryRaw) []column {
	return []column{
		{"id", &d.ID},
		{"tenant", &d.Tenant},
		{"webhook_id", &d.WebhookID},
		{"outbox_id", &d.OutboxID},
		{"run_id", &d.RunID},
		{"kind", &d.Kind},
		{"payload", (*[]byte)(&d.Payload)},
		{"url", &d.URL},
		{"secret", &d.Secret},
		{"state", (*string)(&d.State)},
		{"attempts", &d.Attempts},
		{"next_attempt_at", &x.next},
		{"last_error", &d.LastError},
		{"created_at", &x.created},
		{"delivered_at", &x.delivered},
	}
}

// Delivery reads the columns of a "-- columns: delivery" query.
func Delivery(row Scanner) (store.Delivery, error) {
	var (
		d store.Delivery
		x deliveryRaw
	)
	if err := scan(row, deliveryColumns(&d, &x)); err != nil {
		return store.Delivery{}, err
	}
	d.NextAttemptAt, d.CreatedAt, d.DeliveredAt = Time(x.next), Time(x.created), Time(x.delivered)
	return d, nil
}
