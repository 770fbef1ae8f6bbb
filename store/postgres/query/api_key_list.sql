-- columns: api_key
SELECT id, tenant, name, roles, secret_hash, created_at, revoked_at
FROM api_keys
WHERE @tenant = '' OR tenant = @tenant
ORDER BY created_at, seq;
