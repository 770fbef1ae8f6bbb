INSERT INTO tenant_limits (tenant, max_running) VALUES (@tenant, @max_running)
ON CONFLICT (tenant) DO UPDATE SET max_running = excluded.max_running;
