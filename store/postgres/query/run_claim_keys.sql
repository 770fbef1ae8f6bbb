-- Claims that may take a run with a concurrency key, or a run of a tenant
-- or an agent with a cap or a start rate, take turns: each holds this lock
-- to the end of its transaction, and counts running runs (and reads start
-- buckets) in a statement that starts after it has the lock, so it sees
-- every run the claim before it took. Without the turns two claims could
-- each count a key (or a cap, or a bucket's room) free and take one run
-- each. While no keyed run waits and no tenant or agent has a limit,
-- claims take no lock and run side by side. The lock is the schema's own,
-- so stores in other schemas do not wait for it.
SELECT pg_advisory_xact_lock(hashtextextended('belay claims of keyed runs in ' || current_schema(), 0))
WHERE EXISTS (SELECT 1 FROM runs WHERE status IN ('queued', 'paused') AND concurrency_key <> '')
    OR EXISTS (SELECT 1 FROM tenant_limits) OR EXISTS (SELECT 1 FROM agent_limits);
