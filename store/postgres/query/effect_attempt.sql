-- columns: effect
-- The caller is about to call again under a key whose outcome is not
-- known; a key whose outcome is recorded is left alone and nothing is
-- returned.
UPDATE effects
SET attempts = attempts + 1, epoch = @epoch, in_flight_until = @in_flight_until, updated_at = @now
WHERE tenant = @tenant AND key = @key AND state IN ('pending', 'unknown')
RETURNING tenant, key, run_id, tool, args_hash, args, state, result, step, attempts,
    epoch, in_flight_until, created_at, updated_at;
