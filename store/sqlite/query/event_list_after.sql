-- columns: event
-- @runs is a JSON array of cursors, [{"run": "run_...", "after": 42}, ...]:
-- one statement reads many runs' traces, each through its run's index.
SELECT e.id, r.id AS run_id, e.step, e.type, e.ts, e.data
FROM json_each(@runs) c
JOIN runs r ON r.id = c.value ->> '$.run'
JOIN events e ON e.run_ref = r.ref AND e.id > c.value ->> '$.after'
ORDER BY e.id
LIMIT @limit;
