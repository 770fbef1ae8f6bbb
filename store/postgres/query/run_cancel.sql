-- columns: run
-- A canceled run has ended. Its lease is let go as a checkpoint lets go of
-- one: the owner is cleared, so that no write of a worker still holding it
-- lands (every fence wants the owner and a run not ended), and the epoch is
-- kept.
UPDATE runs
SET status = 'canceled',
    stop_reason = 'canceled',
    stop_detail = @stop_detail,
    lease_owner = '',
    lease_expires = 0,
    updated_at = @now,
    changed_at = @now
WHERE id = @id AND (@tenant = '' OR tenant = @tenant)
RETURNING id, tenant, user_id, client_request_id, agent, agent_version, input, dry_run, requested_by,
    status, step, message_count, input_tokens, output_tokens, model_calls, cost_nano_usd,
    plan, guard, lease_owner, lease_expires, lease_epoch, resume_after,
    stop_reason, stop_detail, final, budget, escalation, created_at, updated_at, sensitive,
    concurrency_key, concurrency_limit, priority;
