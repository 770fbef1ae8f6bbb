-- Revoking twice keeps the first revocation's time.
UPDATE api_keys
SET revoked_at = CASE WHEN revoked_at = 0 THEN @now ELSE revoked_at END
WHERE id = @id AND tenant = @tenant;
