-- columns: signal
-- The oldest signal of a name the run has not consumed.
SELECT id, tenant, run_id, name, key, payload, created_at, consumed_by
FROM signals INDEXED BY signals_kept
WHERE run_id = @run_id AND name = @name AND consumed_by = ''
ORDER BY created_at, rowid
LIMIT 1;
