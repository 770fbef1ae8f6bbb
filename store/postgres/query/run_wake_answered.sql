-- The last answer a run waits for puts it back in the queue and wakes idle
-- workers.
WITH woken AS (
    UPDATE runs
    SET status = 'queued', updated_at = @now, changed_at = @now
    WHERE id = @run_id AND status = 'waiting_input'
        AND NOT EXISTS (SELECT 1 FROM waits w
            WHERE w.tenant = runs.tenant AND w.run_id = runs.id AND w.status = 'pending')
    RETURNING tenant, id
)
SELECT pg_notify('belay_wakeup', json_build_object('schema', current_schema(), 'tenant', tenant, 'run', id)::text)
FROM woken;
