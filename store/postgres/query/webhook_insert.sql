-- A webhook id that exists, in any tenant, violates the primary key.
INSERT INTO webhooks (id, tenant, url, secret, kinds, created_at, disabled_at)
VALUES (@id, @tenant, @url, @secret, @kinds, @created_at, @disabled_at);
