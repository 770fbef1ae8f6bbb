INSERT INTO schedules (tenant, name, agent, spec, input, overlap, missed, next_at, created_by, created_at)
VALUES (@tenant, @name, @agent, @spec, @input, @overlap, @missed, @next_at, @created_by, @now)
ON CONFLICT (tenant, name) DO UPDATE SET
    agent = excluded.agent, spec = excluded.spec, input = excluded.input, overlap = excluded.overlap,
    missed = excluded.missed, next_at = excluded.next_at, created_by = excluded.created_by, created_at = excluded.created_at;
