-- An effect of a fork's parent, copied into the fork's ledger under the
-- fork's key with its outcome as the parent recorded it. No call of it is
-- in flight for the fork.
INSERT INTO effects (
    tenant, key, run_id, tool, args_hash, args, state, result, step, attempts,
    epoch, in_flight_until, created_at, updated_at
) VALUES (
    @tenant::text, @key::text, @run_id::text, @tool::text, @args_hash::text, @args::bytea, @state::text,
    @result::bytea, @step::integer, @attempts::integer, 0, 0, @created_at::bigint, @now::bigint
);
