-- columns: journal
-- The rows of the journals of many runs that hold events after their
-- cursors, in the order written: one statement reads many runs' traces,
-- each through the key from its cursor on.
SELECT j.run_id, j.step, j.at, j.first_message, j.messages, j.first_event, j.events, j.body
FROM unnest(@run_ids::text[], @afters::bigint[]) AS c (run_id, after)
JOIN runs r ON r.id = c.run_id
JOIN journal j ON j.tenant = r.tenant AND j.run_id = c.run_id AND j.next_event > c.after + 1
WHERE j.events > 0
ORDER BY j.id
LIMIT @limit;
