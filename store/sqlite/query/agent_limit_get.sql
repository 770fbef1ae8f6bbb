-- An agent's cap on its running runs and its start rate; 0 when it has
-- none.
SELECT coalesce(max(max_running), 0), coalesce(max(starts_per_minute), 0) FROM agent_limits WHERE agent = @agent;
