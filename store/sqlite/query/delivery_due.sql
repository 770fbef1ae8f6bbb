-- columns: delivery
-- Pending deliveries whose next attempt is due and whose lease, if any, has
-- expired, oldest first.
SELECT d.id, d.tenant, d.webhook_id, d.outbox_id, d.run_id, d.kind, o.payload, w.url, w.secret,
    d.state, d.attempts, d.next_attempt_at, d.last_error, d.created_at, d.delivered_at
FROM deliveries d
JOIN outbox o ON o.id = d.outbox_id
JOIN webhooks w ON w.id = d.webhook_id
WHERE d.state = 'pending' AND d.next_attempt_at <= @now AND d.lease_expires <= @now
ORDER BY d.created_at, d.rowid
LIMIT @limit;
