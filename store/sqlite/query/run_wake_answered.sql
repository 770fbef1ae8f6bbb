-- The last answer a run waits for puts it back in the queue.
UPDATE runs
SET status = 'queued', updated_at = @now
WHERE id = @run_id AND status = 'waiting_input'
    AND NOT EXISTS (SELECT 1 FROM waits INDEXED BY waits_run WHERE run_id = @run_id AND status = 'pending');
