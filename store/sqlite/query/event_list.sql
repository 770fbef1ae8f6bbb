SELECT id, run_id, step, type, ts, data
FROM events
WHERE run_id = @run_id
ORDER BY id;
