-- columns: wait
-- wait_list.sql for one run, through the run's index. A null limit is no
-- limit.
SELECT id, tenant, run_id, step, tool_use_id, kind, name, prompt, binding, status, expires_at, created_at,
    answer, answer_key, answered_by, answered_at
FROM waits
WHERE tenant = (SELECT r.tenant FROM runs r WHERE r.id = @run_id AND (@tenant = '' OR r.tenant = @tenant))
    AND run_id = @run_id
    AND (@status = '' OR status = @status)
ORDER BY created_at, seq
LIMIT @limit;
