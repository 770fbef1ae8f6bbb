INSERT INTO schedules (tenant, name, agent, spec, input, overlap, missed, next_at, created_by, created_at)
VALUES (@tenant::text, @name::text, @agent::text, @spec::text, @input::text, @overlap::text, @missed::text,
        @next_at::bigint, @created_by::text, @now::bigint)
ON CONFLICT (tenant, name) DO UPDATE SET
    agent = excluded.agent, spec = excluded.spec, input = excluded.input, overlap = excluded.overlap,
    missed = excluded.missed, next_at = excluded.next_at, created_by = excluded.created_by, created_at = excluded.created_at;
