-- columns: wait
SELECT id, tenant, run_id, step, tool_use_id, kind, name, prompt, binding, status, expires_at, created_at,
    answer, answer_key, answered_by, answered_at
FROM waits
WHERE tenant = @tenant AND run_id = @run_id
    AND (@id = '' OR id = @id) AND (@kind = '' OR kind = @kind)
    AND (@name = '' OR name = @name)
ORDER BY created_at DESC, seq DESC
LIMIT 1;
