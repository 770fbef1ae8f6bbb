-- The queued runs of one tenant a claim may take, highest priority first,
-- then oldest, up to the limit; read in runs_queued_fair's order, so a
-- claim costs the runs it reads, not all that wait. A kill switch stops new
-- work for its tenant, or everyone's. @agents, a JSON array, limits the
-- claim to runs of those agents; '' claims any. A run with a concurrency
-- key is due only while its key has room: fewer running runs of its tenant
-- with that key than its limit.
SELECT id, agent, priority, updated_at
FROM runs INDEXED BY runs_queued_fair
WHERE status = 'queued' AND tenant = @tenant
    AND (@agents = '' OR agent IN (SELECT value FROM json_each(@agents)))
    AND NOT EXISTS (SELECT 1 FROM kill_switches k
        WHERE k.engaged = 1 AND (k.tenant = '' OR k.tenant = runs.tenant))
    AND (concurrency_key = '' OR (SELECT count(*) FROM runs h
        WHERE h.status = 'running'
            AND h.tenant = runs.tenant AND h.concurrency_key = runs.concurrency_key) < concurrency_limit)
ORDER BY priority DESC, updated_at, id
LIMIT @limit;
