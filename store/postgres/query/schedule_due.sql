-- columns: schedule
SELECT tenant, name, agent, spec, input, overlap, missed, next_at, last_run_id, last_fired_at, created_by, created_at
FROM schedules
WHERE next_at <= @now::bigint AND (@all_agents::boolean OR agent = ANY(@agents::text[]))
ORDER BY next_at
LIMIT @limit::integer;
