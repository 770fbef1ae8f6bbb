-- columns: wait
-- A null limit is no limit.
SELECT id, tenant, run_id, step, tool_use_id, kind, name, prompt, binding, status, expires_at, created_at,
    answer, answer_key, answered_by, answered_at
FROM waits
WHERE (@tenant = '' OR tenant = @tenant)
    AND (@status = '' OR status = @status)
ORDER BY created_at, seq
LIMIT @limit;
