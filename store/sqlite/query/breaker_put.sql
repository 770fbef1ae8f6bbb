INSERT INTO breakers (name, state, failures, window_start, open_until, probe_owner, probe_until, changed_at)
VALUES (@name, @state, @failures, @window_start, @open_until, @probe_owner, @probe_until, @changed_at)
ON CONFLICT (name) DO UPDATE
SET state = excluded.state, failures = excluded.failures, window_start = excluded.window_start,
    open_until = excluded.open_until, probe_owner = excluded.probe_owner, probe_until = excluded.probe_until,
    changed_at = excluded.changed_at;
