-- The caller is about to call again under a key whose outcome is not known.
UPDATE effects
SET attempts = attempts + 1, updated_at = @now
WHERE tenant = @tenant AND key = @key
RETURNING tenant, key, run_id, tool, args_hash, args, state, result, step, attempts,
    created_at, updated_at;
