-- columns: wait
-- wait_list.sql for one run, through the run's index. A null limit is no
-- limit.
SELECT id, tenant, run_id, step, tool_use_id, kind, name, prompt, binding, status, expires_at, created_at,
    answer, answer_key, answered_by, answered_at
FROM waits
WHERE tenant = (SELECT r.tenant FROM runs r WHERE r.id = @run_id AND (@tenant = '' OR r.tenant = @tenant))
    AND run_id = @run_id
    AND (@status = '' OR status = @status)
    AND (@kinds = '' OR strpos(@kinds, ',' || kind || ',') > 0)
    AND (@after = '' OR (created_at, seq) > (SELECT a.created_at, a.seq FROM waits a WHERE a.id = @after))
ORDER BY created_at, seq
LIMIT @limit;
