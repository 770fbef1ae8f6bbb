-- The pending waits of a run that was canceled are closed at once by
-- whoever canceled it: nobody should answer a question of a run that
-- ended, nor wait for its expiry to learn so.
UPDATE waits
SET status = 'canceled', answered_by = @by, answered_at = @now
WHERE run_id = @run_id AND status = 'pending';
