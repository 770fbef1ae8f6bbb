-- Pending approvals past their expiry, oldest first, their runs locked as
-- approval_lock_run.sql does. Runs another transaction holds are skipped:
-- expirers running at once take disjoint approvals, and a person deciding
-- at the same moment is not waited for.
SELECT a.id
FROM approvals a
JOIN runs r ON r.tenant = a.tenant AND r.id = a.run_id
WHERE a.status = 'pending' AND a.expires_at <= @now
ORDER BY a.expires_at, a.seq
LIMIT 100
FOR NO KEY UPDATE OF r SKIP LOCKED;
