-- Runs a released kill switch had paused go back to the queue, unless
-- another switch that covers them is still engaged; idle workers are told
-- once per tenant.
WITH requeued AS (
    UPDATE runs
    SET status = 'queued', stop_reason = '', stop_detail = '', escalation = NULL,
        updated_at = @now, changed_at = @now
    WHERE status = 'paused' AND stop_reason = @stop_reason
        AND (@tenant = '' OR tenant = @tenant)
        AND NOT EXISTS (SELECT 1 FROM kill_switches k
            WHERE k.engaged AND (k.tenant = '' OR k.tenant = runs.tenant))
    RETURNING tenant
)
SELECT pg_notify('belay_wakeup', json_build_object('schema', current_schema(), 'tenant', tenant)::text)
FROM (SELECT DISTINCT tenant FROM requeued) t;
