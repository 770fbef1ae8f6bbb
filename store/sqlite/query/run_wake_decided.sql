-- The last decision of a run's turn puts the run back in the queue. The
-- run's own approvals are read through their run's index: without
-- statistics SQLite would rather read every pending approval of every run
-- by status, which cost a decision 10 ms over 20,000 parked runs.
UPDATE runs
SET status = 'queued', updated_at = @now
WHERE id = @run_id AND status = 'waiting_approval'
    AND NOT EXISTS (SELECT 1 FROM approvals INDEXED BY approvals_run WHERE run_id = @run_id AND status = 'pending');
