-- columns: session
-- A session lives while it has not expired and its key is not revoked.
SELECT s.token_hash, s.key_id, s.tenant, s.created_at, s.expires_at
FROM sessions s
JOIN api_keys k ON k.id = s.key_id
WHERE s.token_hash = @token_hash AND s.expires_at > @now AND k.revoked_at = 0;
