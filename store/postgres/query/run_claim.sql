-- columns: claimed_run
-- Claims due runs: queued runs, running runs whose lease has expired,
-- paused runs whose resume_after has passed. A waiting_approval run and a
-- paused run without resume_after wait for a person, never for the clock.
-- Rows another claim holds are skipped, not waited for, so claims running
-- at once take disjoint runs.
--
-- Runs on an expired lease go first, oldest first. The others are taken in
-- turns between tenants: each tenant's runs in its own order (higher
-- priority, then older, first), the next run always from the tenant with
-- the fewest runs running, counting those the claim takes before it;
-- between tenants with as many, the run due first. A tenant with a deep
-- backlog so never holds back another's first run for more than one claim.
-- A tenant with a cap (tenant_limits) gets none while it has as many
-- running, and an agent with one (agent_limits) likewise. A queued run
-- starts only while its tenant's and its agent's start rates have room:
-- each is a rate bucket (rate_buckets, starts:tenant:T and starts:agent:A,
-- as store.StartBucket names and sizes it) the claim takes one unit from
-- for each run it starts.
--
-- A queued or paused run with a concurrency key is due only while its key
-- has room: fewer running runs of its tenant with that key than its limit
-- (a running run on an expired lease holds its key until it is claimed
-- again). Claims that may take keyed runs take turns (run_claim_keys.sql),
-- so each counts the runs the one before it took.
WITH RECURSIVE tenants AS (
    -- The tenants with queued runs, each once: a skip from tenant to tenant
    -- in runs_queued_fair, so it costs the tenants, not their runs.
    (SELECT tenant FROM runs WHERE status = 'queued' ORDER BY tenant LIMIT 1)
    UNION ALL
    SELECT (SELECT r.tenant FROM runs r WHERE r.status = 'queued' AND r.tenant > t.tenant ORDER BY r.tenant LIMIT 1)
    FROM tenants t
    WHERE t.tenant IS NOT NULL
), queued AS MATERIALIZED (
    -- Each tenant's first runs, up to the limit, in the tenant's order.
    SELECT q.*
    FROM tenants t
    CROSS JOIN LATERAL (
        SELECT id, tenant, agent, priority, changed_at, '' AS taken_from, status, concurrency_key, concurrency_limit,
            false AS expired
        FROM runs
        WHERE status = 'queued' AND runs.tenant = t.tenant
            -- A kill switch stops new work for its tenant, or everyone's.
            AND NOT EXISTS (SELECT 1 FROM kill_switches k WHERE k.engaged AND k.tenant = '')
            AND runs.tenant NOT IN (SELECT k.tenant FROM kill_switches k WHERE k.engaged)
            -- Only runs of the agents the worker can run; none named, any.
            AND (cardinality(@agents::text[]) = 0 OR runs.agent = ANY (@agents::text[]))
            AND CASE WHEN runs.concurrency_key = '' THEN true
                ELSE (SELECT count(*) FROM runs h
                    WHERE h.status = 'running'
                        AND h.tenant = runs.tenant AND h.concurrency_key = runs.concurrency_key) < runs.concurrency_limit
                END
        ORDER BY priority DESC, changed_at, id
        LIMIT @limit
        FOR UPDATE SKIP LOCKED) q
    WHERE t.tenant IS NOT NULL
), expired AS MATERIALIZED (
    -- Runs that started before on a lease that has expired, oldest change
    -- first, from the running runs alone (runs_lease). lease_owner is the
    -- owner the lease is taken from.
    SELECT id, tenant, agent, priority, changed_at, lease_owner AS taken_from, status, concurrency_key, concurrency_limit,
        true AS expired
    FROM runs
    WHERE status = 'running' AND lease_expires <= @now
        AND NOT EXISTS (SELECT 1 FROM kill_switches k WHERE k.engaged AND k.tenant = '')
        AND runs.tenant NOT IN (SELECT k.tenant FROM kill_switches k WHERE k.engaged)
        AND (cardinality(@agents::text[]) = 0 OR runs.agent = ANY (@agents::text[]))
    ORDER BY changed_at, id
    LIMIT @limit
    FOR UPDATE SKIP LOCKED
), timed AS MATERIALIZED (
    -- Runs paused until a time that has come, found by that time
    -- (runs_timed), so that a claim never walks the paused runs whose time
    -- is still to come, however many sleep; oldest change first.
    SELECT id, tenant, agent, priority, changed_at, '' AS taken_from, status, concurrency_key, concurrency_limit,
        false AS expired
    FROM runs
    WHERE status = 'paused' AND resume_after <> 0 AND resume_after <= @now
        AND NOT EXISTS (SELECT 1 FROM kill_switches k WHERE k.engaged AND k.tenant = '')
        AND runs.tenant NOT IN (SELECT k.tenant FROM kill_switches k WHERE k.engaged)
        AND (cardinality(@agents::text[]) = 0 OR runs.agent = ANY (@agents::text[]))
        AND CASE WHEN runs.concurrency_key = '' THEN true
            ELSE (SELECT count(*) FROM runs h
                WHERE h.status = 'running'
                    AND h.tenant = runs.tenant AND h.concurrency_key = runs.concurrency_key) < runs.concurrency_limit
            END
    ORDER BY changed_at, id
    LIMIT @limit
    FOR UPDATE SKIP LOCKED
), later AS (
    -- Runs that started before: on an expired lease, or paused until a
    -- time that has come, oldest change first.
    SELECT * FROM (SELECT * FROM expired UNION ALL SELECT * FROM timed) l
    ORDER BY changed_at, id
    LIMIT @limit
), due AS (
    SELECT * FROM queued
    UNION ALL
    SELECT * FROM later
), held AS (
    -- How many runs of each tenant are running: its share of the workers;
    -- its cap, if it has one (0: none); and its start rate's room.
    SELECT d.tenant, (SELECT count(*) FROM runs h WHERE h.status = 'running' AND h.tenant = d.tenant) AS running,
        coalesce(l.max_running, 0) AS max_running, coalesce(l.starts_per_minute, 0) AS starts_per_minute,
        'starts:tenant:' || d.tenant AS bucket
    FROM (SELECT DISTINCT tenant FROM due) d LEFT JOIN tenant_limits l ON l.tenant = d.tenant
), agent_held AS (
    -- Each agent's cap and start rate, if it has them; its running runs
    -- are counted only when it has a cap.
    SELECT d.agent, coalesce(l.max_running, 0) AS max_running, coalesce(l.starts_per_minute, 0) AS starts_per_minute,
        CASE WHEN coalesce(l.max_running, 0) > 0
            THEN (SELECT count(*) FROM runs h WHERE h.status = 'running' AND h.agent = d.agent) ELSE 0 END AS running,
        'starts:agent:' || d.agent AS bucket
    FROM (SELECT DISTINCT agent FROM due) d LEFT JOIN agent_limits l ON l.agent = d.agent
), start_room AS (
    -- How many runs each start rate may start now: the whole units in its
    -- bucket, refilled since it was last taken from (a bucket not stored
    -- yet is full), none while it is drained.
    SELECT r.bucket, r.rate, r.burst,
        CASE WHEN b.name IS NULL THEN r.burst
            WHEN b.blocked_until > @now THEN 0
            ELSE least(r.burst, b.tokens + greatest(@now - b.updated_at, 0) / 1e9 * r.rate)
        END AS level
    FROM (
        SELECT bucket, starts_per_minute / 60.0 AS rate, greatest(1, starts_per_minute / 60.0) AS burst
        FROM held WHERE starts_per_minute > 0
        UNION ALL
        SELECT bucket, starts_per_minute / 60.0, greatest(1, starts_per_minute / 60.0)
        FROM agent_held WHERE starts_per_minute > 0
    ) r LEFT JOIN rate_buckets b ON b.name = r.bucket
), ranked AS (
    SELECT due.*, held.max_running, agent_held.max_running AS agent_max_running,
        held.running + row_number() OVER (PARTITION BY due.tenant
            ORDER BY expired DESC, priority DESC, changed_at, id) - 1 AS load,
        agent_held.running + row_number() OVER (PARTITION BY due.agent
            ORDER BY expired DESC, priority DESC, changed_at, id) - 1 AS agent_load,
        -- The starts before it in its tenant's and its agent's order, and
        -- the room their start rates have (NULL: no rate).
        row_number() OVER (PARTITION BY due.tenant, due.status = 'queued'
            ORDER BY priority DESC, changed_at, id) AS tenant_start,
        row_number() OVER (PARTITION BY due.agent, due.status = 'queued'
            ORDER BY priority DESC, changed_at, id) AS agent_start,
        (SELECT floor(s.level) FROM start_room s WHERE s.bucket = held.bucket) AS tenant_room,
        (SELECT floor(s.level) FROM start_room s WHERE s.bucket = agent_held.bucket) AS agent_room,
        -- Of the due runs of one key, only as many as it has room for.
        row_number() OVER (PARTITION BY due.tenant, concurrency_key, expired
            ORDER BY priority DESC, changed_at, id) AS nth
    FROM due JOIN held ON held.tenant = due.tenant JOIN agent_held ON agent_held.agent = due.agent
), fits AS (
    SELECT id, tenant, agent, changed_at, taken_from, expired, load, status = 'queued' AS start
    FROM ranked d
    -- A tenant or an agent at its cap gets no more runs; a run on an
    -- expired lease is running already. A queued run starts only within
    -- its start rates' room; counting every start before it in the order,
    -- whether or not another rule holds that one back, never starts more
    -- than the room.
    WHERE (expired OR max_running = 0 OR load < max_running)
        AND (expired OR agent_max_running = 0 OR agent_load < agent_max_running)
        AND (status <> 'queued' OR ((tenant_room IS NULL OR tenant_start <= tenant_room)
            AND (agent_room IS NULL OR agent_start <= agent_room)))
        AND (concurrency_key = '' OR expired
        OR nth + (SELECT count(*) FROM runs h
            WHERE h.status = 'running'
                AND h.tenant = d.tenant AND h.concurrency_key = d.concurrency_key) <= concurrency_limit)
    ORDER BY expired DESC, CASE WHEN expired THEN 0 ELSE load END, changed_at, id
    LIMIT @limit
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
    RETURNING fits.expired, fits.load, fits.start, fits.changed_at AS due_at, fits.taken_from, runs.*
), started AS (
    -- What the claim's starts take from their start rates' buckets.
    INSERT INTO rate_buckets (name, tokens, updated_at, blocked_until)
    SELECT s.bucket, s.level - n.starts, @now, 0
    FROM start_room s
    JOIN (
        SELECT 'starts:tenant:' || tenant AS bucket, count(*) AS starts FROM claimed WHERE start GROUP BY tenant
        UNION ALL
        SELECT 'starts:agent:' || agent, count(*) FROM claimed WHERE start GROUP BY agent
    ) n ON n.bucket = s.bucket
    ON CONFLICT (name) DO UPDATE SET tokens = excluded.tokens, updated_at = excluded.updated_at
)
SELECT id, tenant, user_id, client_request_id, agent, agent_version, input, dry_run, requested_by,
    status, step, message_count, input_tokens, output_tokens, model_calls, cost_nano_usd,
    plan, guard, lease_owner, lease_expires, lease_epoch, resume_after,
    stop_reason, stop_detail, final, budget, escalation, created_at, updated_at, sensitive,
    concurrency_key, concurrency_limit, priority, taken_from
FROM claimed
ORDER BY expired DESC, CASE WHEN expired THEN 0 ELSE load END, due_at, id;
