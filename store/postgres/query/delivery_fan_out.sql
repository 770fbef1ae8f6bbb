-- Fans the oldest undispatched outbox messages out into one pending delivery
-- per enabled webhook of their tenant that takes their kind, and marks the
-- messages dispatched (delivered_at), in one statement. A message with no
-- such webhook is marked all the same: a webhook created later does not get
-- it.
--
-- Messages another fan-out holds are skipped, not waited for, and a delivery
-- that exists is left as it is: senders fanning out at once never make one
-- twice. The webhooks are share-locked, so that disabling one waits for this
-- transaction and then fails what it fanned out (webhook_disable.sql).
--
-- Delivery ids are random: one made of the outbox id would tell a receiver
-- how many notifications every tenant wrote in between.
WITH batch AS MATERIALIZED (
    SELECT tenant, id, run_id, kind
    FROM outbox
    WHERE delivered_at = 0
    ORDER BY id
    LIMIT 1000
    FOR UPDATE SKIP LOCKED
), targets AS MATERIALIZED (
    SELECT b.tenant, b.id AS outbox_id, b.run_id, b.kind, w.id AS webhook_id, w.created_at, w.seq
    FROM batch b
    JOIN webhooks w ON w.tenant = b.tenant
    WHERE w.disabled_at = 0 AND (cardinality(w.kinds) = 0 OR b.kind = ANY (w.kinds))
    FOR SHARE OF w
), fanned AS (
    INSERT INTO deliveries (id, tenant, webhook_id, outbox_id, run_id, kind, state, next_attempt_at, created_at)
    SELECT 'dl_' || replace(gen_random_uuid()::text, '-', ''), t.tenant, t.webhook_id, t.outbox_id, t.run_id, t.kind,
        'pending', @now::bigint, @now::bigint
    FROM targets t
    ORDER BY t.outbox_id, t.created_at, t.seq
    ON CONFLICT (outbox_id, webhook_id) DO NOTHING
)
UPDATE outbox
SET delivered_at = @now
FROM batch b
WHERE outbox.tenant = b.tenant AND outbox.id = b.id;
