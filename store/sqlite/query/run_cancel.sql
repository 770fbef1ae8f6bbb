-- columns: run
-- The lease is released as a checkpoint releases it: the owner is cleared
-- and the epoch kept, so every write under the old fence is refused.
UPDATE runs
SET status = 'canceled',
    stop_reason = 'canceled',
    stop_detail = @stop_detail,
    lease_owner = '',
    lease_expires = 0,
    ended_at = @now,
    updated_at = @now
WHERE id = @id
RETURNING id, tenant, user_id, client_request_id, agent, agent_version, input, dry_run, requested_by,
    status, step, message_count, input_tokens, output_tokens, model_calls, cost_nano_usd,
    plan, guard, lease_owner, lease_expires, lease_epoch, resume_after,
    stop_reason, stop_detail, final, budget, escalation, created_at, updated_at, sensitive,
    concurrency_key, concurrency_limit, priority;
