-- Disabling twice keeps the first time.
UPDATE webhooks
SET disabled_at = CASE WHEN disabled_at = 0 THEN @now ELSE disabled_at END
WHERE id = @id AND tenant = @tenant;
