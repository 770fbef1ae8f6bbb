INSERT INTO sessions (token_hash, key_id, tenant, created_at, expires_at)
VALUES (@token_hash, @key_id, @tenant, @created_at, @expires_at);
