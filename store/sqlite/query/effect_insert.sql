INSERT INTO effects (
    tenant, key, run_id, tool, args_hash, args, state, result, step, attempts,
    created_at, updated_at
) VALUES (
    @tenant, @key, @run_id, @tool, @args_hash, @args, 'pending', @result, @step, 1,
    @now, @now
)
RETURNING tenant, key, run_id, tool, args_hash, args, state, result, step, attempts,
    created_at, updated_at;
