-- columns: run
-- The runs in flight under a live lease, read through runs_status_lease
-- (status, lease_expires): a run waiting for a person or ended is never
-- read.
SELECT id, tenant, user_id, client_request_id, agent, agent_version, input, dry_run, requested_by,
    status, step, message_count, input_tokens, output_tokens, model_calls, cost_nano_usd,
    plan, guard, lease_owner, lease_expires, lease_epoch, resume_after,
    stop_reason, stop_detail, final, budget, escalation, created_at, updated_at, sensitive,
    concurrency_key, concurrency_limit, priority
FROM runs
WHERE status = 'running' AND lease_expires > @now
ORDER BY lease_expires
LIMIT @limit;
