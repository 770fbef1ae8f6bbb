UPDATE approvals
SET status = 'rejected',
    decided_by = @by,
    decided_at = @now,
    note = @note
WHERE run_id = @run_id AND status = 'pending';
