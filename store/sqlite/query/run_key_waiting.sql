-- Whether the run holds a concurrency key that other runs of its tenant
-- wait for, queued or paused: once it leaves its step they may be due, and
-- the processes watching the store are woken rather than left to their
-- next poll. A run without a key is answered from its row alone.
SELECT EXISTS (
    SELECT 1 FROM runs r JOIN runs w ON w.tenant = r.tenant AND w.concurrency_key = r.concurrency_key
    WHERE r.id = @id AND r.concurrency_key <> '' AND w.id <> r.id AND w.status IN ('queued', 'paused')
);
