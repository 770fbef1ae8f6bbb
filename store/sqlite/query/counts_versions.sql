SELECT agent, agent_version, count(*) FROM runs
WHERE status NOT IN ('done', 'failed', 'escalated', 'canceled')
GROUP BY agent, agent_version
ORDER BY agent, agent_version;
