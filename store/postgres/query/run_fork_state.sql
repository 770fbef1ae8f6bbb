-- columns: run
-- A fork's state as its parent's was at the step it was cut at, written
-- just after the fork's row is inserted.
UPDATE runs
SET step = @step::integer,
    message_count = @message_count::integer,
    input_tokens = @input_tokens::bigint,
    output_tokens = @output_tokens::bigint,
    model_calls = @model_calls::bigint,
    cost_nano_usd = @cost_nano_usd::bigint,
    plan = @plan::bytea,
    guard = @guard::bytea
WHERE id = @id::text
RETURNING id, tenant, user_id, client_request_id, agent, agent_version, input, dry_run, requested_by,
    status, step, message_count, input_tokens, output_tokens, model_calls, cost_nano_usd,
    plan, guard, lease_owner, lease_expires, lease_epoch, resume_after,
    stop_reason, stop_detail, final, budget, escalation, created_at, updated_at, sensitive,
    concurrency_key, concurrency_limit, priority;
