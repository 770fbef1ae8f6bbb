-- columns: message
SELECT run_id, seq, step, role, content, created_at
FROM messages
WHERE tenant = (SELECT tenant FROM runs WHERE id = @run_id) AND run_id = @run_id
ORDER BY seq;
