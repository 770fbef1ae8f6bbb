-- Approvals: tool calls waiting for a person, and the decisions taken.
-- Listed in creation order, ties by rowid (insertion order).

CREATE TABLE approvals (
    id             TEXT    NOT NULL PRIMARY KEY,
    tenant         TEXT    NOT NULL,
    run_id         TEXT    NOT NULL REFERENCES runs (id),
    step           INTEGER NOT NULL,
    tool_use_id    TEXT    NOT NULL,
    tool           TEXT    NOT NULL,
    args           BLOB    NOT NULL,
    args_hash      TEXT    NOT NULL,
    reason         TEXT    NOT NULL,
    category       TEXT    NOT NULL,
    summary        TEXT    NOT NULL,
    policy_version TEXT    NOT NULL,
    binding        TEXT    NOT NULL,
    status         TEXT    NOT NULL CHECK (status IN ('pending', 'approved', 'edited', 'rejected', 'expired')),
    expires_at     INTEGER NOT NULL,
    created_at     INTEGER NOT NULL,
    edited_args    BLOB,
    edited_hash    TEXT    NOT NULL DEFAULT '',
    decided_by     TEXT    NOT NULL DEFAULT '',
    decided_at     INTEGER NOT NULL DEFAULT 0,
    note           TEXT    NOT NULL DEFAULT ''
) STRICT;

-- A replayed step asks for the same call again: it finds this row.
CREATE UNIQUE INDEX approvals_call ON approvals (tenant, run_id, tool, args_hash);
CREATE INDEX approvals_run ON approvals (run_id, created_at);
-- The durable timer: pending approvals by expiry.
CREATE INDEX approvals_expiry ON approvals (status, expires_at);
CREATE INDEX approvals_tenant_status ON approvals (tenant, status, created_at);

PRAGMA user_version = 3;
