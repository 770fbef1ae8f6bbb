-- Waits: what a run waits for from outside it (the user's reply to a
-- question, a named event), beside the approvals a person decides. A run that waits is
-- waiting_input.
ALTER TABLE runs DROP CONSTRAINT runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check CHECK (status IN (
    'queued', 'running', 'waiting_approval', 'waiting_input', 'paused',
    'done', 'failed', 'escalated', 'canceled'));

CREATE TABLE waits (
    -- Wait ids are unique across tenants, as run ids are.
    id          text    NOT NULL PRIMARY KEY,
    seq         bigint  NOT NULL GENERATED ALWAYS AS IDENTITY,
    tenant      text    NOT NULL,
    run_id      text    NOT NULL,
    step        integer NOT NULL,
    tool_use_id text    NOT NULL,
    kind        text    NOT NULL,
    name        text    NOT NULL,
    prompt      bytea   NOT NULL,
    binding     text    NOT NULL,
    status      text    NOT NULL CHECK (status IN ('pending', 'answered', 'expired')),
    expires_at  bigint  NOT NULL,
    created_at  bigint  NOT NULL,
    answer      bytea,
    answer_key  text    NOT NULL DEFAULT '',
    answered_by text    NOT NULL DEFAULT '',
    answered_at bigint  NOT NULL DEFAULT 0,
    FOREIGN KEY (tenant, run_id) REFERENCES runs (tenant, id)
);

-- A step run again asks with the same tool call: it finds this row.
CREATE UNIQUE INDEX waits_call ON waits (tenant, run_id, tool_use_id);
CREATE INDEX waits_run ON waits (tenant, run_id, status);
-- An answer repeated under its idempotency key finds the wait it answered.
CREATE UNIQUE INDEX waits_answer_key ON waits (tenant, run_id, answer_key) WHERE answer_key <> '';
-- The durable timer: pending waits by expiry.
CREATE INDEX waits_expiry ON waits (expires_at) WHERE status = 'pending';
CREATE INDEX waits_tenant_status ON waits (tenant, status, created_at, seq);

ALTER TABLE waits ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON waits
    USING (tenant = nullif(current_setting('belay.tenant', true), ''));

-- Signals: named events sent to a run. One that comes before the run waits
-- for it is kept (consumed_by empty) and consumed when the wait begins.
CREATE TABLE signals (
    id          text    NOT NULL PRIMARY KEY,
    seq         bigint  NOT NULL GENERATED ALWAYS AS IDENTITY,
    tenant      text    NOT NULL,
    run_id      text    NOT NULL,
    name        text    NOT NULL,
    key         text    NOT NULL DEFAULT '',
    payload     bytea   NOT NULL,
    created_at  bigint  NOT NULL,
    consumed_by text    NOT NULL DEFAULT '',
    FOREIGN KEY (tenant, run_id) REFERENCES runs (tenant, id)
);
CREATE INDEX signals_kept ON signals (tenant, run_id, name, seq) WHERE consumed_by = '';
-- A signal sent again under its idempotency key finds the first.
CREATE UNIQUE INDEX signals_key ON signals (tenant, run_id, key) WHERE key <> '';

ALTER TABLE signals ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON signals
    USING (tenant = nullif(current_setting('belay.tenant', true), ''));
