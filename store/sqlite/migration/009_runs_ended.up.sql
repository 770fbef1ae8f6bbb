-- ended_at is when a run ended: written by the write that ends it (a
-- checkpoint or a cancel), never by a mid-run checkpoint. PruneRuns reads
-- ended runs by it, through an index that holds only ended runs; mid-run
-- checkpoints change neither its column nor its condition's, so they cost
-- it nothing. (An index on updated_at, which every step writes, cost every
-- step a tenth more.)
ALTER TABLE runs ADD COLUMN ended_at INTEGER NOT NULL DEFAULT 0;
UPDATE runs SET ended_at = updated_at WHERE status IN ('done', 'failed', 'escalated', 'canceled');
CREATE INDEX runs_ended ON runs (ended_at, id)
    WHERE status IN ('done', 'failed', 'escalated', 'canceled');

PRAGMA user_version = 9;
