-- columns: breaker
SELECT name, state, failures, window_start, open_until, probe_owner, probe_until, changed_at
FROM breakers WHERE name = @name
FOR UPDATE;
