-- columns: effect
-- The last attempt under this key is known not to have landed: a new
-- intent begins.
UPDATE effects
SET state = 'pending', result = NULL, step = @step, attempts = attempts + 1,
    epoch = @epoch, in_flight_until = @in_flight_until, updated_at = @now
WHERE tenant = @tenant AND key = @key
RETURNING tenant, key, run_id, tool, args_hash, args, state, result, step, attempts,
    epoch, in_flight_until, created_at, updated_at;
