-- columns: due_run
-- The runs that started before and are due again, oldest first: running on
-- an expired lease (a worker died or let go), or paused until a time that
-- has come. A waiting_approval run and a paused run without resume_after
-- wait for a person, never for the clock. Queued runs are read tenant by
-- tenant (run_due_queued.sql). Each kind is read in its own index's order
-- up to the limit, so a claim costs the runs it takes, not all that wait.
-- A kill switch stops new work for its tenant, or everyone's. @agents, a
-- JSON array, limits the claim to runs of those agents; '' claims any. A
-- paused run with a concurrency key is due only while its key has room:
-- fewer running runs of its tenant with that key than its limit (a running
-- run on an expired lease holds its key until it is claimed again).
-- lease_owner is the owner an expired lease is taken from; a paused run has
-- none, as a run lets go of its lease when it stops.
SELECT id, lease_owner, tenant, agent, priority, updated_at, expired
FROM (
    SELECT id, lease_owner, tenant, agent, priority, updated_at, 1 AS expired FROM (
        SELECT id, lease_owner, tenant, agent, priority, updated_at FROM runs
        WHERE status = 'running' AND lease_expires <= @now
            AND (@agents = '' OR agent IN (SELECT value FROM json_each(@agents)))
            AND NOT EXISTS (SELECT 1 FROM kill_switches k
                WHERE k.engaged = 1 AND (k.tenant = '' OR k.tenant = runs.tenant))
        ORDER BY lease_expires
        LIMIT @limit)
    UNION ALL
    SELECT id, '' AS lease_owner, tenant, agent, priority, updated_at, 0 AS expired FROM (
        SELECT id, tenant, agent, priority, updated_at FROM runs
        WHERE status = 'paused' AND resume_after <> 0 AND resume_after <= @now
            AND (@agents = '' OR agent IN (SELECT value FROM json_each(@agents)))
            AND NOT EXISTS (SELECT 1 FROM kill_switches k
                WHERE k.engaged = 1 AND (k.tenant = '' OR k.tenant = runs.tenant))
            AND (concurrency_key = '' OR (SELECT count(*) FROM runs h
                WHERE h.status = 'running'
                    AND h.tenant = runs.tenant AND h.concurrency_key = runs.concurrency_key) < concurrency_limit)
        ORDER BY resume_after
        LIMIT @limit));
