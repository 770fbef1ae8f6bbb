-- columns: effect
SELECT tenant, key, run_id, tool, args_hash, args, state, result, step, attempts,
    epoch, in_flight_until, created_at, updated_at
FROM effects
WHERE run_id = @run_id AND (@tenant = '' OR tenant = @tenant)
ORDER BY created_at, key;
