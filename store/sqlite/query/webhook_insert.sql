INSERT INTO webhooks (id, tenant, url, secret, kinds, created_at)
VALUES (@id, @tenant, @url, @secret, @kinds, @created_at);
