-- A breaker not stored yet is closed; it is created so that workers can
-- lock it.
INSERT INTO breakers (name, state, failures, window_start, open_until, probe_owner, probe_until, changed_at)
VALUES (@name, 'closed', 0, 0, 0, '', 0, 0)
ON CONFLICT (name) DO NOTHING;
