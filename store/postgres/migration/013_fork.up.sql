-- Forks: where a forked run came from (its parent, the parent's step its
-- history was cut at, who forked it and why), one row per fork. No foreign
-- key to the parent: a parent pruned before its fork leaves the fork's
-- lineage naming a run that is gone, which is still where it came from.
CREATE TABLE run_lineage (
    tenant        text    NOT NULL,
    run_id        text    NOT NULL,
    parent_run_id text    NOT NULL,
    at_step       integer NOT NULL,
    forked_by     text    NOT NULL,
    reason        text    NOT NULL,
    created_at    bigint  NOT NULL,
    PRIMARY KEY (tenant, run_id)
);
CREATE INDEX run_lineage_parent ON run_lineage (tenant, parent_run_id, created_at);

ALTER TABLE run_lineage ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON run_lineage
    USING (tenant = nullif(current_setting('belay.tenant', true), ''));

-- An approval of a fork's call that repeats an effect the parent recorded
-- after the fork's step names that effect (JSON), so whoever decides sees
-- that the parent did this already. Empty otherwise.
ALTER TABLE approvals ADD COLUMN parent_effect bytea NOT NULL DEFAULT '';
