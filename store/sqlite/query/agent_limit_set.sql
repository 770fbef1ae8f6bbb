INSERT INTO agent_limits (agent, max_running, starts_per_minute) VALUES (@agent, @max_running, @starts_per_minute)
ON CONFLICT (agent) DO UPDATE SET max_running = excluded.max_running, starts_per_minute = excluded.starts_per_minute;
