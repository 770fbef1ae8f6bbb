-- columns: wait
-- wait_list.sql for one run, through the run's index.
SELECT id, tenant, run_id, step, tool_use_id, kind, name, prompt, binding, status, expires_at, created_at,
    answer, answer_key, answered_by, answered_at
FROM waits INDEXED BY waits_run
WHERE run_id = @run_id AND (@tenant = '' OR tenant = @tenant) AND (@status = '' OR status = @status)
    AND (@kinds = '' OR instr(@kinds, ',' || kind || ',') > 0)
    AND (@after = '' OR (created_at, rowid) > (SELECT a.created_at, a.rowid FROM waits a WHERE a.id = @after))
ORDER BY created_at, rowid
LIMIT @limit;
