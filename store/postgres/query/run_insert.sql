-- columns: run
-- A run of the same (tenant, user, client request id) is left as it is and
-- nothing is returned.
INSERT INTO runs (
    id, tenant, user_id, client_request_id, agent, agent_version, input, dry_run, requested_by,
    budget, sensitive, concurrency_key, concurrency_limit, priority, status, created_at, updated_at, changed_at
) VALUES (
    @id, @tenant, @user, @client_request_id, @agent, @agent_version, @input, @dry_run, @requested_by,
    @budget, @sensitive, @concurrency_key, @concurrency_limit, @priority, 'queued', @now, @now, @now
)
ON CONFLICT (tenant, user_id, client_request_id) WHERE client_request_id <> '' DO NOTHING
RETURNING id, tenant, user_id, client_request_id, agent, agent_version, input, dry_run, requested_by,
    status, step, message_count, input_tokens, output_tokens, model_calls, cost_nano_usd,
    plan, guard, lease_owner, lease_expires, lease_epoch, resume_after,
    stop_reason, stop_detail, final, budget, escalation, created_at, updated_at, sensitive,
    concurrency_key, concurrency_limit, priority;
