-- columns: effect
-- A new intent starts pending at attempt 1, the call about to go out. An existing key is left as it
-- is and nothing is returned.
INSERT INTO effects (
    tenant, key, run_id, tool, args_hash, args, state, result, step, attempts,
    epoch, in_flight_until, created_at, updated_at
) VALUES (
    @tenant, @key, @run_id, @tool, @args_hash, @args, 'pending', @result, @step, 1,
    @epoch, @in_flight_until, @now, @now
)
ON CONFLICT (tenant, key) DO NOTHING
RETURNING tenant, key, run_id, tool, args_hash, args, state, result, step, attempts,
    epoch, in_flight_until, created_at, updated_at;
