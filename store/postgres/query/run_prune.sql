-- Deletes up to @limit runs that ended before @before, the earliest ended
-- first, with everything they own, in one statement: PostgreSQL checks the
-- foreign keys once it has run, when the runs and their rows are all gone.
--
-- Locks are taken in the order a webhook fan-out takes them, so that the
-- two never deadlock: a fan-out locks the notifications it dispatches, then
-- its deliveries' foreign key share-locks their run. So prune first locks
-- the candidates' notifications not yet dispatched, skipping those a
-- fan-out holds, and keeps for a later prune a run it could not lock them
-- all of; then it locks the runs, skipping those another transaction holds.
-- A run that has not ended is never read.
WITH candidates AS MATERIALIZED (
    SELECT tenant, id FROM runs
    WHERE status IN ('done', 'failed', 'escalated', 'canceled') AND changed_at < @before
    ORDER BY changed_at, id
    LIMIT @limit
), undispatched AS MATERIALIZED (
    SELECT o.tenant, o.run_id FROM outbox o
    JOIN candidates c ON o.tenant = c.tenant AND o.run_id = c.id
    WHERE o.delivered_at = 0
), taken AS MATERIALIZED (
    SELECT o.tenant, o.run_id FROM outbox o
    JOIN candidates c ON o.tenant = c.tenant AND o.run_id = c.id
    WHERE o.delivered_at = 0
    FOR UPDATE OF o SKIP LOCKED
), doomed AS MATERIALIZED (
    SELECT r.tenant, r.id FROM runs r
    JOIN candidates c ON r.tenant = c.tenant AND r.id = c.id
    WHERE (SELECT count(*) FROM undispatched u WHERE u.tenant = r.tenant AND u.run_id = r.id)
        = (SELECT count(*) FROM taken t WHERE t.tenant = r.tenant AND t.run_id = r.id)
    FOR UPDATE OF r SKIP LOCKED
), journal_gone AS (
    DELETE FROM journal x USING doomed d WHERE x.tenant = d.tenant AND x.run_id = d.id
), effects_gone AS (
    DELETE FROM effects x USING doomed d WHERE x.tenant = d.tenant AND x.run_id = d.id
), approvals_gone AS (
    DELETE FROM approvals x USING doomed d WHERE x.tenant = d.tenant AND x.run_id = d.id
), waits_gone AS (
    DELETE FROM waits x USING doomed d WHERE x.tenant = d.tenant AND x.run_id = d.id
), signals_gone AS (
    DELETE FROM signals x USING doomed d WHERE x.tenant = d.tenant AND x.run_id = d.id
), deliveries_gone AS (
    DELETE FROM deliveries x USING doomed d WHERE x.tenant = d.tenant AND x.run_id = d.id
), outbox_gone AS (
    DELETE FROM outbox x USING doomed d WHERE x.tenant = d.tenant AND x.run_id = d.id
), lineage_gone AS (
    DELETE FROM run_lineage x USING doomed d WHERE x.tenant = d.tenant AND x.run_id = d.id
), runs_gone AS (
    DELETE FROM runs x USING doomed d WHERE x.tenant = d.tenant AND x.id = d.id
    RETURNING 1
)
SELECT count(*) FROM runs_gone;
