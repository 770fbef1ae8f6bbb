-- A key id that exists, in any tenant, violates the primary key.
INSERT INTO api_keys (id, tenant, name, roles, secret_hash, created_at, revoked_at)
VALUES (@id, @tenant, @name, @roles, @secret_hash, @created_at, @revoked_at);
