-- columns: webhook
SELECT id, tenant, url, secret, kinds, created_at, disabled_at
FROM webhooks
WHERE tenant = @tenant
ORDER BY created_at, rowid;
