INSERT INTO approvals (
    id, tenant, run_id, step, tool_use_id, tool, args, args_hash, reason, category, summary,
    policy_version, binding, self_approval, status, expires_at, created_at, parent_effect
)
SELECT @id, tenant, @run_id, @step, @tool_use_id, @tool, @args, @args_hash, @reason, @category, @summary,
    @policy_version, @binding, @self_approval, 'pending', @expires_at, @now, @parent_effect
FROM runs WHERE id = @run_id
ON CONFLICT (tenant, run_id, tool, args_hash) DO NOTHING;
