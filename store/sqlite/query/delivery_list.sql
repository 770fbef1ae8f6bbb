-- columns: delivery
SELECT d.id, d.tenant, d.webhook_id, d.outbox_id, d.run_id, d.kind, o.payload, w.url, w.secret,
    d.state, d.attempts, d.next_attempt_at, d.last_error, d.created_at, d.delivered_at
FROM deliveries d
JOIN outbox o ON o.id = d.outbox_id
JOIN webhooks w ON w.id = d.webhook_id
WHERE (@tenant = '' OR d.tenant = @tenant)
    AND (@webhook_id = '' OR d.webhook_id = @webhook_id)
    AND (@run_id = '' OR d.run_id = @run_id)
ORDER BY d.created_at, d.rowid
LIMIT @limit;
