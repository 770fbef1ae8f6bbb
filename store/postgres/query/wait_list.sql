-- columns: wait
-- A null limit is no limit. @kinds is "" or the kinds between commas
-- (",person,result,"); @after the id of the wait the page starts after.
SELECT id, tenant, run_id, step, tool_use_id, kind, name, prompt, binding, status, expires_at, created_at,
    answer, answer_key, answered_by, answered_at
FROM waits
WHERE (@tenant = '' OR tenant = @tenant)
    AND (@status = '' OR status = @status)
    AND (@kinds = '' OR strpos(@kinds, ',' || kind || ',') > 0)
    AND (@after = '' OR (created_at, seq) > (SELECT a.created_at, a.seq FROM waits a WHERE a.id = @after))
ORDER BY created_at, seq
LIMIT @limit;
