-- columns: wait
-- A wait is answered once, or expired once.
UPDATE waits
SET status = @status,
    answer = @answer,
    answer_key = @key,
    answered_by = @by,
    answered_at = @now
WHERE id = @id AND status = 'pending'
RETURNING id, tenant, run_id, step, tool_use_id, kind, name, prompt, binding, status, expires_at, created_at,
    answer, answer_key, answered_by, answered_at;
