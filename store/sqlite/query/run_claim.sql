-- columns: run
-- A run with a concurrency key is taken only while its key has room, counted
-- in this transaction: the runs taken before it in the same claim count.
-- A run that is running already (on an expired lease) holds its key.
UPDATE runs
SET lease_owner = @owner,
    lease_expires = @expires,
    lease_epoch = lease_epoch + 1,
    status = 'running',
    updated_at = @now
WHERE id = @id
    AND (status = 'running' OR concurrency_key = '' OR (SELECT count(*) FROM runs h
        WHERE h.status = 'running'
            AND h.tenant = runs.tenant AND h.concurrency_key = runs.concurrency_key) < concurrency_limit)
RETURNING id, tenant, user_id, client_request_id, agent, agent_version, input, dry_run, requested_by,
    status, step, message_count, input_tokens, output_tokens, model_calls, cost_nano_usd,
    plan, guard, lease_owner, lease_expires, lease_epoch, resume_after,
    stop_reason, stop_detail, final, budget, escalation, created_at, updated_at, sensitive,
    concurrency_key, concurrency_limit, priority;
