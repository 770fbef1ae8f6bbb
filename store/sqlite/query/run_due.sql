-- A waiting_approval run and a paused run without resume_after wait for a
-- person, never for the clock.
SELECT id
FROM runs
WHERE (status = 'queued'
    OR (status = 'running' AND lease_expires <= @now)
    OR (status = 'paused' AND resume_after <> 0 AND resume_after <= @now))
    -- A kill switch stops new work for its tenant, or everyone's.
    AND NOT EXISTS (SELECT 1 FROM kill_switches k
        WHERE k.engaged = 1 AND (k.tenant = '' OR k.tenant = runs.tenant))
ORDER BY updated_at, id
LIMIT @limit;
