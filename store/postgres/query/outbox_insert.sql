INSERT INTO outbox (tenant, run_id, kind, payload, created_at)
SELECT tenant, id, @kind::text, @payload::bytea, @now::bigint
FROM runs
WHERE id = @run_id;
