-- columns: wait
-- The wait an answer is for: the one it names, or the run's oldest pending
-- one of its kind.
SELECT id, tenant, run_id, step, tool_use_id, kind, name, prompt, binding, status, expires_at, created_at,
    answer, answer_key, answered_by, answered_at
FROM waits
WHERE tenant = @tenant AND run_id = @run_id AND status = 'pending'
    AND (@id = '' OR id = @id) AND (@kind = '' OR kind = @kind)
    AND (@name = '' OR name = @name)
ORDER BY created_at, seq
LIMIT 1;
