INSERT INTO kill_switches (tenant, engaged, reason, updated_at)
VALUES (@tenant, @engaged, @reason, @now)
ON CONFLICT (tenant) DO UPDATE
SET engaged = excluded.engaged, reason = excluded.reason, updated_at = excluded.updated_at;
