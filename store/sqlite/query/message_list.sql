SELECT run_id, seq, step, role, content, created_at
FROM messages
WHERE run_id = @run_id
ORDER BY seq;
