-- columns: message
SELECT r.id AS run_id, m.seq, m.step, m.role, m.content, m.created_at
FROM runs r JOIN messages m ON m.run_ref = r.ref
WHERE r.id = @run_id
ORDER BY m.seq;
