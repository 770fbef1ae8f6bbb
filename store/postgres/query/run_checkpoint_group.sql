-- The checkpoints of several runs in one statement, and so in one
-- transaction and one commit. Each checkpoint is a row of the run arrays,
-- numbered from 1 in order (its ord); the rows it appends name it in their
-- req arrays. It returns the ord of every checkpoint whose fence held, and
-- of every checkpoint it skipped because another transaction held its run's
-- row: the others were fenced off and wrote nothing.
--
-- The fence is run_checkpoint.sql's, or run_checkpoint_keep.sql's for a
-- checkpoint that keeps the lease, which leaves status, lease, timer and
-- changed_at as they are (set to themselves, so the update stays HOT). The
-- run ids must be distinct: a run updated twice in one statement takes only
-- one of the two.
--
-- A settle of a key that was never begun raises BL002, and a message
-- appended over one its run has BL003: either fails them all, as any other
-- error does; the caller then writes each checkpoint alone to find out whose
-- it was.
WITH r AS (
    SELECT *
    FROM unnest(
        @id::text[], @owner::text[], @epoch::bigint[], @keep::boolean[], @status::text[],
        @step::integer[], @message_count::integer[], @input_tokens::bigint[],
        @output_tokens::bigint[], @model_calls::bigint[], @cost_nano_usd::bigint[],
        @plan::bytea[], @guard::bytea[], @resume_after::bigint[], @stop_reason::text[],
        @stop_detail::text[], @final::text[], @escalation::bytea[], @lease_expires::bigint[],
        @now::bigint[], @wake::boolean[], @first_message::integer[], @messages::integer[],
        @events::integer[], @journal_step::integer[], @journal_at::bigint[], @journal_body::bytea[]
    ) WITH ORDINALITY AS r (
        id, owner, epoch, keep, status, step, message_count, input_tokens, output_tokens,
        model_calls, cost_nano_usd, plan, guard, resume_after, stop_reason, stop_detail, final,
        escalation, lease_expires, now, wake, first_message, messages, events, journal_step,
        journal_at, journal_body, ord
    )
), misplaced AS (
    -- Checkpoints that would append a message over one their run has: the
    -- runs as they were before this statement (every part of it sees them
    -- so) count the messages each has.
    SELECT r.ord
    FROM r JOIN runs ON runs.id = r.id
    WHERE r.first_message >= 0 AND runs.message_count > r.first_message
), locked AS MATERIALIZED (
    -- The runs of the batch whose rows no other transaction holds. A run
    -- whose row is held (a decision, a claim, another process's write, each
    -- a short transaction) is left out of this statement and written alone
    -- after it, so that it waits for itself and holds up no other run.
    SELECT runs.id
    FROM runs JOIN r ON runs.id = r.id
    FOR NO KEY UPDATE OF runs SKIP LOCKED
), fenced AS (
    UPDATE runs
    SET status = CASE WHEN r.keep THEN runs.status ELSE r.status END,
        step = r.step,
        message_count = r.message_count,
        input_tokens = r.input_tokens,
        output_tokens = r.output_tokens,
        model_calls = r.model_calls,
        cost_nano_usd = r.cost_nano_usd,
        plan = r.plan,
        guard = r.guard,
        resume_after = CASE WHEN r.keep THEN runs.resume_after ELSE r.resume_after END,
        stop_reason = r.stop_reason,
        stop_detail = r.stop_detail,
        final = r.final,
        escalation = r.escalation,
        lease_owner = CASE WHEN NOT r.keep AND r.lease_expires = 0 THEN '' ELSE runs.lease_owner END,
        lease_expires = CASE WHEN r.keep THEN runs.lease_expires ELSE r.lease_expires END,
        event_count = runs.event_count + r.events,
        updated_at = r.now,
        changed_at = CASE WHEN r.keep THEN runs.changed_at ELSE r.now END
    FROM r
    WHERE runs.id = r.id AND runs.id IN (SELECT id FROM locked)
        AND runs.lease_owner = r.owner AND runs.lease_owner <> ''
        AND runs.lease_epoch = r.epoch
        AND runs.status NOT IN ('done', 'failed', 'escalated', 'canceled')
        AND (NOT r.keep OR runs.status = 'running')
    RETURNING r.ord, runs.tenant, runs.id, r.now, r.wake, runs.event_count,
        -- A run that leaves its step while runs of its concurrency key wait
        -- wakes idle workers too, as run_wakeup_key.sql does.
        (NOT r.keep AND r.status <> 'running' AND runs.concurrency_key <> ''
            AND EXISTS (SELECT 1 FROM runs w
                WHERE w.status IN ('queued', 'paused') AND w.concurrency_key <> ''
                    AND w.tenant = runs.tenant AND w.concurrency_key = runs.concurrency_key)) AS frees_key
), journal_added AS (
    -- A checkpoint's messages and events are one row of its run's journal,
    -- its events numbered after those its run had.
    INSERT INTO journal (tenant, run_id, step, at, first_message, messages, first_event, events, body)
    SELECT f.tenant, f.id, r.journal_step, r.journal_at, greatest(r.first_message, 0), r.messages,
        f.event_count - r.events + 1, r.events, r.journal_body
    FROM fenced f JOIN r ON r.ord = f.ord
    WHERE r.messages + r.events > 0
), settles AS (
    SELECT s.tenant, s.key, s.state, s.result, f.now
    FROM unnest(@settle_req::bigint[], @settle_tenant::text[], @settle_key::text[],
            @settle_state::text[], @settle_result::bytea[])
        AS s (req, tenant, key, state, result)
    JOIN fenced f ON f.ord = s.req
), settled AS (
    UPDATE effects
    SET state = s.state, result = s.result, updated_at = s.now
    FROM settles s
    WHERE effects.tenant = s.tenant AND effects.key = s.key
    RETURNING 1
), approvals_added AS (
    -- An approval asked for again by a replayed step, same call under
    -- another id, is left as it is.
    INSERT INTO approvals (
        id, tenant, run_id, step, tool_use_id, tool, args, args_hash, reason, category, summary,
        policy_version, binding, self_approval, status, expires_at, created_at
    )
    SELECT a.id, f.tenant, f.id, a.step, a.tool_use_id, a.tool, a.args, a.args_hash, a.reason,
        a.category, a.summary, a.policy_version, a.binding, a.self_approval, 'pending',
        a.expires_at, f.now
    FROM unnest(@approval_req::bigint[], @approval_id::text[], @approval_step::integer[],
            @approval_tool_use_id::text[], @approval_tool::text[], @approval_args::bytea[],
            @approval_args_hash::text[], @approval_reason::text[], @approval_category::text[],
            @approval_summary::text[], @approval_policy_version::text[], @approval_binding::text[],
            @approval_self_approval::boolean[], @approval_expires_at::bigint[])
        WITH ORDINALITY AS a (req, id, step, tool_use_id, tool, args, args_hash, reason, category,
            summary, policy_version, binding, self_approval, expires_at, ord)
    JOIN fenced f ON f.ord = a.req
    ORDER BY a.ord
    ON CONFLICT (tenant, run_id, tool, args_hash) DO NOTHING
), outbox_added AS (
    INSERT INTO outbox (tenant, run_id, kind, payload, created_at)
    SELECT f.tenant, f.id, o.kind, o.payload, f.now
    FROM unnest(@outbox_req::bigint[], @outbox_kind::text[], @outbox_payload::bytea[])
        WITH ORDINALITY AS o (req, kind, payload, ord)
    JOIN fenced f ON f.ord = o.req
    ORDER BY o.ord
)
-- A row for each checkpoint whose fence held, and one for each left out
-- because its run's row was held (skipped): the caller writes those alone.
-- A checkpoint that lets go of a run still due wakes idle workers, as
-- run_wakeup.sql does.
SELECT f.ord, false AS skipped,
    CASE WHEN f.wake OR f.frees_key THEN pg_notify('belay_wakeup',
        json_build_object('schema', current_schema(), 'tenant', f.tenant, 'run', f.id)::text)::text
    END
FROM fenced f
WHERE raise_if((SELECT count(*) FROM settled) <> (SELECT count(*) FROM settles),
        'BL002', 'settle effect: never begun')
    AND raise_if(EXISTS (SELECT 1 FROM misplaced m JOIN fenced f ON f.ord = m.ord),
        'BL003', 'append messages: a message of that sequence number exists')
UNION ALL
SELECT r.ord, true, NULL
FROM r
WHERE r.id NOT IN (SELECT id FROM locked);
