-- columns: claimed_run
-- Due runs, oldest change of status or lease first: queued runs, running
-- runs whose lease has expired, paused runs whose resume_after has passed. A
-- waiting_approval run and a paused run without resume_after wait for a
-- person, never for the clock. Rows another claim holds are skipped, not
-- waited for, so claims running at once take disjoint runs.
--
-- A queued or paused run with a concurrency key is due only while its key
-- has room: fewer running runs of its tenant with that key than its limit
-- (a running run on an expired lease holds its key until it is claimed
-- again). Claims that may take keyed runs take turns (run_claim_keys.sql),
-- so each counts the runs the one before it took.
WITH due AS MATERIALIZED (
    -- lease_owner is the owner an expired lease is taken from; a queued or
    -- paused run has none, as a run lets go of its lease when it stops.
    SELECT id, changed_at, lease_owner AS taken_from, status, tenant, concurrency_key, concurrency_limit
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
        AND CASE WHEN runs.concurrency_key = '' OR runs.status = 'running' THEN true
            ELSE (SELECT count(*) FROM runs h
                WHERE h.status = 'running' AND h.concurrency_key <> ''
                    AND h.tenant = runs.tenant AND h.concurrency_key = runs.concurrency_key) < runs.concurrency_limit
            END
    ORDER BY changed_at, id
    LIMIT @limit
    FOR UPDATE SKIP LOCKED
), fits AS (
    -- Of the due runs of one key, only as many as it has room for: the
    -- others wait for a later claim.
    SELECT id, changed_at, taken_from FROM (
        SELECT due.*,
            row_number() OVER (PARTITION BY tenant, concurrency_key, status = 'running'
                ORDER BY changed_at, id) AS nth
        FROM due) d
    WHERE concurrency_key = '' OR status = 'running'
        OR nth + (SELECT count(*) FROM runs h
            WHERE h.status = 'running' AND h.concurrency_key <> ''
                AND h.tenant = d.tenant AND h.concurrency_key = d.concurrency_key) <= concurrency_limit
), claimed AS (
    UPDATE runs
    SET lease_owner = @owner,
        lease_expires = @expires,
        lease_epoch = lease_epoch + 1,
        status = 'running',
        updated_at = @now,
        changed_at = @now
    FROM fits
    WHERE runs.id = fits.id
    RETURNING fits.changed_at AS due_at, fits.taken_from, runs.*
)
SELECT id, tenant, user_id, client_request_id, agent, agent_version, input, dry_run, requested_by,
    status, step, message_count, input_tokens, output_tokens, model_calls, cost_nano_usd,
    plan, guard, lease_owner, lease_expires, lease_epoch, resume_after,
    stop_reason, stop_detail, final, budget, escalation, created_at, updated_at, sensitive,
    concurrency_key, concurrency_limit, priority, taken_from
FROM claimed
ORDER BY due_at, id;
