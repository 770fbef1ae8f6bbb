INSERT INTO api_keys (id, tenant, name, roles, secret_hash, created_at)
VALUES (@id, @tenant, @name, @roles, @secret_hash, @created_at);
