-- A waiting_approval run and a paused run without resume_after wait for a
-- person, never for the clock.
SELECT id
FROM runs
WHERE status = 'queued'
    OR (status = 'running' AND lease_expires <= @now)
    OR (status = 'paused' AND resume_after <> 0 AND resume_after <= @now)
ORDER BY updated_at, id
LIMIT @limit;
