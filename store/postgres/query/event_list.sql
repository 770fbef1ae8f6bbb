-- columns: event
SELECT id, run_id, step, type, ts, data
FROM events
WHERE tenant = (SELECT tenant FROM runs WHERE id = @run_id) AND run_id = @run_id
ORDER BY id;
