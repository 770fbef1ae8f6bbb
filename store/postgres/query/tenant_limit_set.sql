INSERT INTO tenant_limits (tenant, max_running, starts_per_minute) VALUES (@tenant, @max_running, @starts_per_minute)
ON CONFLICT (tenant) DO UPDATE SET max_running = excluded.max_running, starts_per_minute = excluded.starts_per_minute;
