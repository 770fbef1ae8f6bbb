-- Forks: where a forked run came from (its parent, the parent's step its
-- history was cut at, who forked it and why), one row per fork. No foreign
-- key to the parent: a parent pruned before its fork leaves the fork's
-- lineage naming a run that is gone, which is still where it came from.
CREATE TABLE run_lineage (
    run_id        TEXT    NOT NULL PRIMARY KEY,
    tenant        TEXT    NOT NULL,
    parent_run_id TEXT    NOT NULL,
    at_step       INTEGER NOT NULL,
    forked_by     TEXT    NOT NULL,
    reason        TEXT    NOT NULL,
    created_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX run_lineage_parent ON run_lineage (tenant, parent_run_id, created_at);

-- An approval of a fork's call that repeats an effect the parent recorded
-- after the fork's step names that effect (JSON), so whoever decides sees
-- that the parent did this already. Empty otherwise.
ALTER TABLE approvals ADD COLUMN parent_effect BLOB NOT NULL DEFAULT x'';

PRAGMA user_version = 14;
