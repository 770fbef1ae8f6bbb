-- columns: event
SELECT e.id, r.id AS run_id, e.step, e.type, e.ts, e.data
FROM runs r JOIN events e ON e.run_ref = r.ref
WHERE r.id = @run_id
ORDER BY e.id;
