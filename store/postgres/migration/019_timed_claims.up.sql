-- Claims find the runs that may be due again by what makes them due: a
-- running run by its lease, among the running runs alone, and a paused run
-- by its time. Walking runs_due_again in change order passed every paused
-- run whose time was still to come, so with 100,000 runs asleep each claim
-- read them all, and a due timer fired seconds late.
CREATE INDEX runs_lease ON runs (changed_at, id) WHERE status = 'running';
CREATE INDEX runs_timed ON runs (resume_after) WHERE status = 'paused' AND resume_after <> 0;
