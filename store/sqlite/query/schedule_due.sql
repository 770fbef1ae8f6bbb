-- columns: schedule
SELECT tenant, name, agent, spec, input, overlap, missed, next_at, last_run_id, last_fired_at, created_by, created_at
FROM schedules
WHERE next_at <= @now AND (@all_agents OR agent IN (SELECT value FROM json_each(@agents)))
ORDER BY next_at
LIMIT @limit;
