-- Pending waits past their expiry, oldest first, their runs locked as
-- wait_lock_run.sql does. Runs another transaction holds are skipped.
SELECT w.id
FROM waits w
JOIN runs r ON r.tenant = w.tenant AND r.id = w.run_id
WHERE w.status = 'pending' AND w.expires_at <= @now
ORDER BY w.expires_at, w.seq
LIMIT 100
FOR NO KEY UPDATE OF r SKIP LOCKED;
