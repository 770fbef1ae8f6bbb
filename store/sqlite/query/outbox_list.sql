-- columns: outbox
SELECT id, tenant, run_id, kind, payload, created_at, delivered_at, attempts
FROM outbox
WHERE run_id = @run_id
ORDER BY id;
