-- Deletes up to @limit runs that ended before @before, oldest first, with
-- everything they own, in one statement: PostgreSQL checks the foreign keys
-- once it has run, when the runs and their rows are all gone. A run another
-- transaction holds is skipped, and a run that has not ended is never read.
WITH doomed AS (
    SELECT tenant, id FROM runs
    WHERE status IN ('done', 'failed', 'escalated', 'canceled') AND changed_at < @before
    ORDER BY changed_at, id
    LIMIT @limit
    FOR UPDATE SKIP LOCKED
), messages_gone AS (
    DELETE FROM messages x USING doomed d WHERE x.tenant = d.tenant AND x.run_id = d.id
), events_gone AS (
    DELETE FROM events x USING doomed d WHERE x.tenant = d.tenant AND x.run_id = d.id
), effects_gone AS (
    DELETE FROM effects x USING doomed d WHERE x.tenant = d.tenant AND x.run_id = d.id
), approvals_gone AS (
    DELETE FROM approvals x USING doomed d WHERE x.tenant = d.tenant AND x.run_id = d.id
), deliveries_gone AS (
    DELETE FROM deliveries x USING doomed d WHERE x.tenant = d.tenant AND x.run_id = d.id
), outbox_gone AS (
    DELETE FROM outbox x USING doomed d WHERE x.tenant = d.tenant AND x.run_id = d.id
), runs_gone AS (
    DELETE FROM runs x USING doomed d WHERE x.tenant = d.tenant AND x.id = d.id
    RETURNING 1
)
SELECT count(*) FROM runs_gone;
