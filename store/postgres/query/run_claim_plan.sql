-- Claims walk runs_queued_fair and runs_lease in claim order (runs_timed by time) and stop
-- at the limit. Without statistics on runs (a new schema, or autovacuum
-- off) the planner guesses that few runs are due and picks a bitmap scan
-- that reads and sorts every due run on each claim instead; this turns that
-- plan off for the claim's transaction alone.
SELECT set_config('enable_bitmapscan', 'off', true);
