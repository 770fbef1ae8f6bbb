-- columns: claimed_run
-- Due runs, oldest change of status or lease first: queued runs, running
-- runs whose lease has expired, paused runs whose resume_after has passed. A
-- waiting_approval run and a paused run without resume_after wait for a
-- person, never for the clock. Rows another claim holds are skipped, not
-- waited for, so claims running at once take disjoint runs.
WITH due AS MATERIALIZED (
    -- lease_owner is the owner an expired lease is taken from; a queued or
    -- paused run has none, as a run lets go of its lease when it stops.
    SELECT id, changed_at, lease_owner AS taken_from
    FROM runs
    WHERE status IN ('queued', 'running', 'paused')
        AND (status = 'queued'
            OR (status = 'running' AND lease_expires <= @now)
            OR (status = 'paused' AND resume_after <> 0 AND resume_after <= @now))
        -- A kill switch stops new work for its tenant, or everyone's. Two
        -- checks that do not depend on the row scanned, so that the plan
        -- tests them once, and hashes the engaged tenants, however many
        -- rows it scans: the global switch, then the tenant's.
        AND NOT EXISTS (SELECT 1 FROM kill_switches k WHERE k.engaged AND k.tenant = '')
        AND runs.tenant NOT IN (SELECT k.tenant FROM kill_switches k WHERE k.engaged)
        -- Only runs of the agents the worker can run; none named, any.
        AND (cardinality(@agents::text[]) = 0 OR runs.agent = ANY (@agents::text[]))
    ORDER BY changed_at, id
    LIMIT @limit
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE runs
    SET lease_owner = @owner,
        lease_expires = @expires,
        lease_epoch = lease_epoch + 1,
        status = 'running',
        updated_at = @now,
        changed_at = @now
    FROM due
    WHERE runs.id = due.id
    RETURNING due.changed_at AS due_at, due.taken_from, runs.*
)
SELECT id, tenant, user_id, client_request_id, agent, agent_version, input, dry_run, requested_by,
    status, step, message_count, input_tokens, output_tokens, model_calls, cost_nano_usd,
    plan, guard, lease_owner, lease_expires, lease_epoch, resume_after,
    stop_reason, stop_detail, final, budget, escalation, created_at, updated_at, sensitive, taken_from
FROM claimed
ORDER BY due_at, id;
