-- How many runs of an agent are running, of every tenant: what its cap
-- counts.
SELECT count(*) FROM runs WHERE status = 'running' AND agent = @agent;
