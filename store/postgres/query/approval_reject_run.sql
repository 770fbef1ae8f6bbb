-- The pending approvals of a run that was canceled are rejected by whoever
-- canceled it. The caller holds the run's row, as every write to a run's
-- approvals does (approval_lock_run.sql).
UPDATE approvals
SET status = 'rejected', decided_by = @by, decided_at = @now, note = @note
WHERE tenant = (SELECT tenant FROM runs WHERE id = @run_id) AND run_id = @run_id
    AND status = 'pending';
