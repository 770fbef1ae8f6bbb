-- A run's approvals are read in their order through an index that holds
-- them in it, as SQLite's does. The index it replaces, (tenant, run_id,
-- status), gave the plan of approval_list_run.sql a sort to do after it, so
-- a plan made while the approvals' statistics were stale (a store that
-- parks runs quickly after it was created) could as well take
-- approvals_tenant_status, which holds them in order, and read every
-- approval of the tenant to find the run's: parking a run cost more the
-- more runs were parked (belay bench --parked read 50 million index
-- entries to park 10,000 runs).
-- With the run's approvals in order under (tenant, run_id), no plan with a
-- sort costs less, whatever the statistics say.
CREATE INDEX approvals_run_order ON approvals (tenant, run_id, created_at, seq);
DROP INDEX approvals_run;

-- A run's waits are read in their order the same way (wait_list_run.sql),
-- and their index had the same fault.
CREATE INDEX waits_run_order ON waits (tenant, run_id, created_at, seq);
DROP INDEX waits_run;
