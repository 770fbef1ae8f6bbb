-- columns: outbox
SELECT id, tenant, run_id, kind, payload, created_at, delivered_at, attempts
FROM outbox
WHERE tenant = (SELECT tenant FROM runs WHERE id = @run_id) AND run_id = @run_id
ORDER BY id;
