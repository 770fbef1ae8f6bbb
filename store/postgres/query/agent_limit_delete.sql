DELETE FROM agent_limits WHERE agent = @agent;
