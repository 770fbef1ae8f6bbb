-- The oldest undispatched outbox messages, one delivery per enabled webhook
-- of their tenant that takes their kind. outbox_dispatch.sql then marks the
-- same messages, in the same transaction.
WITH batch AS (
    SELECT id, tenant, run_id, kind
    FROM outbox
    WHERE delivered_at = 0
    ORDER BY id
    LIMIT @batch
)
INSERT INTO deliveries (id, tenant, webhook_id, outbox_id, run_id, kind, state, next_attempt_at, created_at)
SELECT 'dl_' || lower(hex(randomblob(16))), o.tenant, w.id, o.id, o.run_id, o.kind, 'pending', @now, @now
FROM batch o
JOIN webhooks w ON w.tenant = o.tenant
WHERE w.disabled_at = 0
    AND (w.kinds = '[]' OR EXISTS (SELECT 1 FROM json_each(w.kinds) k WHERE k.value = o.kind))
ORDER BY o.id, w.created_at, w.rowid
ON CONFLICT (outbox_id, webhook_id) DO NOTHING;
