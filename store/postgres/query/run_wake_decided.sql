-- The last decision of a run's turn puts the run back in the queue and
-- wakes idle workers.
WITH woken AS (
    UPDATE runs
    SET status = 'queued', updated_at = @now, changed_at = @now
    WHERE id = @run_id AND status = 'waiting_approval'
        AND NOT EXISTS (SELECT 1 FROM approvals a
            WHERE a.tenant = runs.tenant AND a.run_id = runs.id AND a.status = 'pending')
    RETURNING tenant, id
)
SELECT pg_notify('belay_wakeup', json_build_object('schema', current_schema(), 'tenant', tenant, 'run', id)::text)
FROM woken;
