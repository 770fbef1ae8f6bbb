-- columns: run
-- A run asked for later (@not_before after @now) is created paused until
-- then: claims take it once it is due, as any paused run's timer.
-- A run of the same (tenant, user, client request id) is left as it is and
-- nothing is returned.
INSERT INTO runs (
    id, tenant, user_id, client_request_id, agent, agent_version, input, dry_run, requested_by,
    budget, sensitive, concurrency_key, concurrency_limit, priority, status, resume_after, stop_reason, created_at, updated_at, changed_at
) VALUES (
    @id, @tenant, @user, @client_request_id, @agent, @agent_version, @input, @dry_run, @requested_by,
    @budget, @sensitive, @concurrency_key, @concurrency_limit, @priority,
    CASE WHEN @not_before::bigint > @now::bigint THEN 'paused' ELSE 'queued' END,
    CASE WHEN @not_before::bigint > @now::bigint THEN @not_before::bigint ELSE 0 END,
    CASE WHEN @not_before::bigint > @now::bigint THEN 'not_before' ELSE '' END,
    @now, @now, @now
)
ON CONFLICT (tenant, user_id, client_request_id) WHERE client_request_id <> '' DO NOTHING
RETURNING id, tenant, user_id, client_request_id, agent, agent_version, input, dry_run, requested_by,
    status, step, message_count, input_tokens, output_tokens, model_calls, cost_nano_usd,
    plan, guard, lease_owner, lease_expires, lease_epoch, resume_after,
    stop_reason, stop_detail, final, budget, escalation, created_at, updated_at, sensitive,
    concurrency_key, concurrency_limit, priority;
