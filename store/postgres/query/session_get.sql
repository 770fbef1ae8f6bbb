-- columns: session
-- A session lives until it expires or ends, or its key is revoked.
SELECT s.token_hash, s.key_id, s.tenant, s.created_at, s.expires_at
FROM sessions s
JOIN api_keys k ON k.tenant = s.tenant AND k.id = s.key_id
WHERE s.token_hash = @token_hash AND NOT s.ended AND s.expires_at > @now AND k.revoked_at = 0;
