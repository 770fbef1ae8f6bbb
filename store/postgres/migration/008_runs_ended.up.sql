-- PruneRuns reads ended runs, oldest first, by when they ended: changed_at,
-- which a run's last checkpoint set with its final status. Only ended runs
-- are in the index, and mid-run checkpoints change neither of its columns,
-- so they stay HOT updates. Building it holds off writes to runs until the
-- migration commits, as every migration's DDL does.
CREATE INDEX runs_ended ON runs (changed_at, id)
    WHERE status IN ('done', 'failed', 'escalated', 'canceled');
