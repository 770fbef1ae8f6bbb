-- columns: effect
INSERT INTO effects (
    tenant, key, run_id, tool, args_hash, args, state, result, step, attempts,
    epoch, in_flight_until, created_at, updated_at
) VALUES (
    @tenant, @key, @run_id, @tool, @args_hash, @args, 'pending', @result, @step, 1,
    @epoch, @in_flight_until, @now, @now
)
RETURNING tenant, key, run_id, tool, args_hash, args, state, result, step, attempts,
    epoch, in_flight_until, created_at, updated_at;
