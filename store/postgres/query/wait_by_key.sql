-- columns: wait
SELECT id, tenant, run_id, step, tool_use_id, kind, name, prompt, binding, status, expires_at, created_at,
    answer, answer_key, answered_by, answered_at
FROM waits
WHERE tenant = @tenant AND run_id = @run_id AND answer_key = @key AND @key <> '';
