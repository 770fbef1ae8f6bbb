INSERT INTO approvals (
    id, tenant, run_id, step, tool_use_id, tool, args, args_hash, reason, category, summary,
    policy_version, binding, status, expires_at, created_at
)
SELECT @id, tenant, @run_id, @step, @tool_use_id, @tool, @args, @args_hash, @reason, @category, @summary,
    @policy_version, @binding, 'pending', @expires_at, @now
FROM runs WHERE id = @run_id
ON CONFLICT (tenant, run_id, tool, args_hash) DO NOTHING;
