-- An effect of a fork's parent, copied into the fork's ledger under the
-- fork's key with its outcome as the parent recorded it. No call of it is
-- in flight for the fork.
INSERT INTO effects (
    tenant, key, run_id, tool, args_hash, args, state, result, step, attempts,
    epoch, in_flight_until, created_at, updated_at
) VALUES (
    @tenant, @key, @run_id, @tool, @args_hash, @args, @state, @result, @step, @attempts,
    0, 0, @created_at, @now
);
