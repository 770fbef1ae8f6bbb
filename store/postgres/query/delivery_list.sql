-- columns: delivery
-- A null limit is no limit.
SELECT d.id, d.tenant, d.webhook_id, d.outbox_id, d.run_id, d.kind, o.payload, w.url, w.secret,
    d.state, d.attempts, d.next_attempt_at, d.last_error, d.created_at, d.delivered_at
FROM deliveries d
JOIN webhooks w ON w.tenant = d.tenant AND w.id = d.webhook_id
JOIN outbox o ON o.tenant = d.tenant AND o.id = d.outbox_id
WHERE (@tenant = '' OR d.tenant = @tenant)
    AND (@webhook_id = '' OR d.webhook_id = @webhook_id)
    AND (@run_id = '' OR d.run_id = @run_id)
ORDER BY d.created_at, d.seq
LIMIT @limit;
