-- The last decision of a run's turn puts the run back in the queue.
UPDATE runs
SET status = 'queued', updated_at = @now
WHERE id = @run_id AND status = 'waiting_approval'
    AND NOT EXISTS (SELECT 1 FROM approvals WHERE run_id = @run_id AND status = 'pending');
