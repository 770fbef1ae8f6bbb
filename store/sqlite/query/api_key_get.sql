-- columns: api_key
SELECT id, tenant, name, roles, secret_hash, created_at, revoked_at
FROM api_keys
WHERE id = @id;
