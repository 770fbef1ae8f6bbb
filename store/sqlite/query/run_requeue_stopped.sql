-- Runs a released kill switch had paused go back to the queue, unless
-- another switch that covers them is still engaged.
UPDATE runs
SET status = 'queued', stop_reason = '', stop_detail = '', escalation = NULL, updated_at = @now
WHERE status = 'paused' AND stop_reason = @stop_reason
    AND (@tenant = '' OR tenant = @tenant)
    AND NOT EXISTS (SELECT 1 FROM kill_switches k
        WHERE k.engaged = 1 AND (k.tenant = '' OR k.tenant = runs.tenant));
