-- Revoking a key again keeps the first revocation. Raises BL002 if the
-- tenant has no such key.
WITH revoked AS (
    UPDATE api_keys
    SET revoked_at = CASE WHEN revoked_at = 0 THEN @now ELSE revoked_at END
    WHERE id = @id AND (@tenant = '' OR tenant = @tenant)
    RETURNING 1
)
SELECT raise_if(count(*) = 0, 'BL002', 'no such key') FROM revoked;
