-- Claims that may take a run with a concurrency key take turns: each holds
-- this lock to the end of its transaction, and counts the runs holding a
-- key in a statement that starts after it has the lock, so it sees every
-- run the claim before it took. Without the turns two claims could each
-- count a key free and take one run of it each. While no keyed run waits,
-- claims take no lock and run side by side as before. The lock is the
-- schema's own, so stores in other schemas do not wait for it.
SELECT pg_advisory_xact_lock(hashtextextended('belay claims of keyed runs in ' || current_schema(), 0))
WHERE EXISTS (SELECT 1 FROM runs WHERE status IN ('queued', 'paused') AND concurrency_key <> '');
