-- delivered_at marks a message as fanned out to its tenant's webhooks.
UPDATE outbox
SET delivered_at = @now
WHERE id IN (
    SELECT id
    FROM outbox
    WHERE delivered_at = 0
    ORDER BY id
    LIMIT @batch
);
