-- columns: schedule
SELECT tenant, name, agent, spec, input, overlap, missed, next_at, last_run_id, last_fired_at, created_by, created_at
FROM schedules
WHERE @tenant::text = '' OR tenant = @tenant::text
ORDER BY tenant, name;
