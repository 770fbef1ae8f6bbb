-- columns: run
-- Newest first: a page of the latest runs, then older ones before @after.
SELECT id, tenant, user_id, client_request_id, agent, agent_version, input, dry_run, requested_by,
    status, step, message_count, input_tokens, output_tokens, model_calls, cost_nano_usd,
    plan, guard, lease_owner, lease_expires, lease_epoch, resume_after,
    stop_reason, stop_detail, final, budget, escalation, created_at, updated_at, sensitive,
    concurrency_key, concurrency_limit, priority
FROM runs
WHERE (@tenant = '' OR tenant = @tenant)
    AND (@status = '' OR status = @status)
    AND (@agent = '' OR agent = @agent)
    AND (@user = '' OR user_id = @user)
    AND (@since::bigint = 0 OR created_at >= @since)
    AND (@after = '' OR id < @after)
ORDER BY id DESC
LIMIT @limit;
