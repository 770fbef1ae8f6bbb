-- columns: schedule
-- A schedule put again with the same spec keeps its next firing: one not
-- yet handled (missed during downtime, say) is not lost to the put.
INSERT INTO schedules (tenant, name, agent, spec, input, overlap, missed, next_at, created_by, created_at)
VALUES (@tenant::text, @name::text, @agent::text, @spec::text, @input::text, @overlap::text, @missed::text,
        @next_at::bigint, @created_by::text, @now::bigint)
ON CONFLICT (tenant, name) DO UPDATE SET
    agent = excluded.agent, spec = excluded.spec, input = excluded.input, overlap = excluded.overlap,
    missed = excluded.missed,
    next_at = CASE WHEN schedules.spec = excluded.spec THEN schedules.next_at ELSE excluded.next_at END, created_by = excluded.created_by, created_at = excluded.created_at
RETURNING tenant, name, agent, spec, input, overlap, missed, next_at, last_run_id, last_fired_at, created_by, created_at;
