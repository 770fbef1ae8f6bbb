-- columns: wait
-- The waits of ids still pending, read after their runs were locked.
SELECT id, tenant, run_id, step, tool_use_id, kind, name, prompt, binding, status, expires_at, created_at,
    answer, answer_key, answered_by, answered_at
FROM waits
WHERE id = ANY(@ids) AND status = 'pending'
ORDER BY expires_at, seq;
