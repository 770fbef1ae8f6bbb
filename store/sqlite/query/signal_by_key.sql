-- columns: signal
SELECT id, tenant, run_id, name, key, payload, created_at, consumed_by
FROM signals
WHERE run_id = @run_id AND key = @key AND @key <> '';
