-- The key must be of the session's tenant (the foreign key).
INSERT INTO sessions (token_hash, tenant, key_id, created_at, expires_at)
VALUES (@token_hash, @tenant, @key_id, @created_at, @expires_at);
