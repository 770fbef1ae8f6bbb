-- columns: event
-- One statement reads many runs' traces, each from after its cursor,
-- through the events' primary key.
SELECT e.id, e.run_id, e.step, e.type, e.ts, e.data
FROM unnest(@run_ids::text[], @afters::bigint[]) AS c (run_id, after)
JOIN runs r ON r.id = c.run_id
JOIN events e ON e.tenant = r.tenant AND e.run_id = c.run_id AND e.id > c.after
ORDER BY e.id
LIMIT @limit;
