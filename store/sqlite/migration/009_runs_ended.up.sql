-- PruneRuns finds ended runs through this index, which holds only them. It
-- is keyed by creation, which never changes, not by the time of the last
-- write: every step writes updated_at, and an index on it would cost every
-- step a tenth more, even of runs not in it.
CREATE INDEX runs_ended ON runs (created_at, id)
    WHERE status IN ('done', 'failed', 'escalated', 'canceled');

PRAGMA user_version = 9;
