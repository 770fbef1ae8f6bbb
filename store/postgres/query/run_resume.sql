-- columns: run
-- A run waiting for a person goes back to the queue; what stopped it is
-- cleared, and so is its escalation packet, now acted on. An empty
-- agent_version keeps the run on the version it was started on; another one
-- is an operator's migration. A non-empty @stop_reason must be the one the
-- run stopped for, or nothing is updated.
UPDATE runs
SET status = 'queued',
    stop_reason = '',
    stop_detail = '',
    resume_after = 0,
    escalation = NULL,
    budget = coalesce(@budget, budget),
    agent_version = coalesce(nullif(@agent_version, ''), agent_version),
    updated_at = @now,
    changed_at = @now
WHERE id = @id AND (@tenant = '' OR tenant = @tenant)
    AND (@stop_reason = '' OR stop_reason = @stop_reason)
RETURNING id, tenant, user_id, client_request_id, agent, agent_version, input, dry_run, requested_by,
    status, step, message_count, input_tokens, output_tokens, model_calls, cost_nano_usd,
    plan, guard, lease_owner, lease_expires, lease_epoch, resume_after,
    stop_reason, stop_detail, final, budget, escalation, created_at, updated_at, sensitive,
    concurrency_key, concurrency_limit, priority;
