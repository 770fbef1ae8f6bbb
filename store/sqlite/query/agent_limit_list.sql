SELECT agent, max_running, starts_per_minute FROM agent_limits ORDER BY agent;
