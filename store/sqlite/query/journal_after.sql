-- columns: journal
-- The rows of the journals of many runs that hold events after their
-- cursors, in the order written. @runs is a JSON array of cursors,
-- [{"run": "run_...", "after": 42}, ...]: one statement reads many runs'
-- traces, each through its run's index from its cursor on.
SELECT r.id AS run_id, j.step, j.at, j.first_message, j.messages, j.first_event, j.events, j.body
FROM json_each(@runs) c
JOIN runs r ON r.id = c.value ->> '$.run'
JOIN journal j ON j.run_ref = r.ref AND j.first_event + j.events > (c.value ->> '$.after') + 1
WHERE j.events > 0
ORDER BY j.id
LIMIT @limit;
