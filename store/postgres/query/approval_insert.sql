-- An approval asked for again by a replayed step, same call under another
-- id, is left as it is.
INSERT INTO approvals (
    id, tenant, run_id, step, tool_use_id, tool, args, args_hash, reason, category, summary,
    policy_version, binding, self_approval, status, expires_at, created_at, parent_effect
)
SELECT @id::text, tenant, id, @step::integer, @tool_use_id::text, @tool::text, @args::bytea,
    @args_hash::text, @reason::text, @category::text, @summary::text, @policy_version::text,
    @binding::text, @self_approval::boolean, 'pending', @expires_at::bigint, @now::bigint, @parent_effect::bytea
FROM runs
WHERE id = @run_id
ON CONFLICT (tenant, run_id, tool, args_hash) DO NOTHING;
