-- columns: delivery
-- Leases up to @limit pending deliveries that are due and not leased, oldest
-- first, raising their attempts. Rows another claim holds are skipped, so
-- senders claiming at once take disjoint deliveries.
WITH due AS MATERIALIZED (
    SELECT id
    FROM deliveries
    WHERE state = 'pending' AND next_attempt_at <= @now AND lease_expires <= @now
    ORDER BY created_at, seq
    LIMIT @limit
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE deliveries d
    SET lease_owner = @owner, lease_expires = @expires, attempts = d.attempts + 1
    FROM due
    WHERE d.id = due.id
    RETURNING d.*
)
SELECT c.id, c.tenant, c.webhook_id, c.outbox_id, c.run_id, c.kind, o.payload, w.url, w.secret,
    c.state, c.attempts, c.next_attempt_at, c.last_error, c.created_at, c.delivered_at
FROM claimed c
JOIN webhooks w ON w.tenant = c.tenant AND w.id = c.webhook_id
JOIN outbox o ON o.tenant = c.tenant AND o.id = c.outbox_id
ORDER BY c.created_at, c.seq;
