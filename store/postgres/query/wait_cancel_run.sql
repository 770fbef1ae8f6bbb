-- The pending waits of a run that was canceled are closed at once by
-- whoever canceled it: nobody should answer a question of a run that
-- ended, nor wait for its expiry to learn so. The caller holds the run's
-- row.
UPDATE waits
SET status = 'canceled', answered_by = @by, answered_at = @now
WHERE tenant = @tenant AND run_id = @run_id AND status = 'pending';
