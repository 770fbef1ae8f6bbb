-- Tells idle workers listening on belay_wakeup that a run left its step
-- while other runs of its tenant wait, queued or paused, for its concurrency
-- key: they may be due now, and would otherwise wait for their workers' next
-- poll. A run without a key, or whose key nobody waits for, notifies
-- nothing. Like run_wakeup.sql, it goes out when the transaction commits.
SELECT pg_notify('belay_wakeup', json_build_object('schema', current_schema(), 'tenant', r.tenant, 'run', r.id)::text)
FROM runs r
WHERE r.id = @id AND r.concurrency_key <> '' AND r.status <> 'running'
    AND EXISTS (SELECT 1 FROM runs w
        WHERE w.status IN ('queued', 'paused') AND w.concurrency_key <> ''
            AND w.tenant = r.tenant AND w.concurrency_key = r.concurrency_key);
