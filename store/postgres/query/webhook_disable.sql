-- Disabling a webhook again keeps the first time. The row lock this takes
-- waits for a fan-out that has share-locked the webhook (delivery_fan_out.sql)
-- to commit, so that delivery_fail_webhook.sql, after this, fails what it
-- fanned out too. Raises BL002 if the tenant has no such webhook.
WITH disabled AS (
    UPDATE webhooks
    SET disabled_at = CASE WHEN disabled_at = 0 THEN @now ELSE disabled_at END
    WHERE id = @id AND (@tenant = '' OR tenant = @tenant)
    RETURNING 1
)
SELECT raise_if(count(*) = 0, 'BL002', 'no such webhook') FROM disabled;
