SELECT tenant, key, run_id, tool, args_hash, args, state, result, step, attempts,
    created_at, updated_at
FROM effects
WHERE tenant = @tenant AND key = @key
FOR UPDATE;
