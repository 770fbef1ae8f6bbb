-- The last call under the key has returned without an outcome: it is in
-- flight no longer. Zero says so without a clock: the write that says it
-- comes after the call, and before any read that finds it.
UPDATE effects
SET in_flight_until = 0, updated_at = @now
WHERE tenant = @tenant AND key = @key AND state IN ('pending', 'unknown') AND in_flight_until <> 0;
