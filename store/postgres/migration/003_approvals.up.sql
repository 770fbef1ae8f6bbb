-- Approvals: tool calls waiting for a person, and the decisions taken.
-- Listed in creation order, ties in insertion order (seq).

CREATE TABLE approvals (
    -- Approval ids are unique across tenants, as run ids are.
    id             text    NOT NULL PRIMARY KEY,
    seq            bigint  NOT NULL GENERATED ALWAYS AS IDENTITY,
    tenant         text    NOT NULL,
    run_id         text    NOT NULL,
    step           integer NOT NULL,
    tool_use_id    text    NOT NULL,
    tool           text    NOT NULL,
    args           bytea   NOT NULL,
    args_hash      text    NOT NULL,
    reason         text    NOT NULL,
    category       text    NOT NULL,
    summary        text    NOT NULL,
    policy_version text    NOT NULL,
    binding        text    NOT NULL,
    status         text    NOT NULL CHECK (status IN ('pending', 'approved', 'edited', 'rejected', 'expired')),
    expires_at     bigint  NOT NULL,
    created_at     bigint  NOT NULL,
    edited_args    bytea,
    edited_hash    text    NOT NULL DEFAULT '',
    decided_by     text    NOT NULL DEFAULT '',
    decided_at     bigint  NOT NULL DEFAULT 0,
    note           text    NOT NULL DEFAULT '',
    FOREIGN KEY (tenant, run_id) REFERENCES runs (tenant, id)
);

-- A replayed step asks for the same call again: it finds this row.
CREATE UNIQUE INDEX approvals_call ON approvals (tenant, run_id, tool, args_hash);
CREATE INDEX approvals_run ON approvals (tenant, run_id, status);
-- The durable timer: pending approvals by expiry.
CREATE INDEX approvals_expiry ON approvals (expires_at) WHERE status = 'pending';
CREATE INDEX approvals_tenant_status ON approvals (tenant, status, created_at, seq);

ALTER TABLE approvals ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON approvals
    USING (tenant = nullif(current_setting('belay.tenant', true), ''));
