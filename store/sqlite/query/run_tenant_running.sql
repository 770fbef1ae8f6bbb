-- How many runs of a tenant are running: its share of the workers now.
SELECT count(*) FROM runs WHERE status = 'running' AND tenant = @tenant;
