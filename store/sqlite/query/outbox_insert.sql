INSERT INTO outbox (tenant, run_id, kind, payload, created_at)
SELECT tenant, @run_id, @kind, @payload, @now FROM runs WHERE id = @run_id;
