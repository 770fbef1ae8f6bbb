-- Times are bigint unix nanoseconds in UTC, 0 for the zero time: timestamptz
-- keeps microseconds, and Belay's times must round-trip exactly. JSON is bytea
-- holding the bytes given: jsonb would re-encode it.
--
-- Every table carries the tenant of its run, and every key and reference
-- includes it. Row-level security confines the application role to the rows
-- of the tenant its transaction names in belay.tenant; an unset or empty
-- belay.tenant names none. The role that owns the tables is not confined:
-- workers claim and checkpoint across tenants through it (see doc.go).

-- raise_if aborts the statement, and with it the transaction, when failed is
-- true. A fenced write that matched no row calls it, so that a pipelined
-- transaction stops there and writes nothing.
CREATE FUNCTION raise_if(failed boolean, code text, message text) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    IF failed THEN
        RAISE EXCEPTION USING ERRCODE = code, MESSAGE = message;
    END IF;
    RETURN true;
END
$$;

CREATE TABLE runs (
    id                text    NOT NULL PRIMARY KEY,
    tenant            text    NOT NULL,
    user_id           text    NOT NULL,
    client_request_id text    NOT NULL,
    agent             text    NOT NULL,
    agent_version     text    NOT NULL,
    input             text    NOT NULL,
    dry_run           boolean NOT NULL,
    status            text    NOT NULL CHECK (status IN (
        'queued', 'running', 'waiting_approval', 'paused',
        'done', 'failed', 'escalated', 'canceled')),
    step              integer NOT NULL DEFAULT 0,
    message_count     integer NOT NULL DEFAULT 0,
    input_tokens      bigint  NOT NULL DEFAULT 0,
    output_tokens     bigint  NOT NULL DEFAULT 0,
    model_calls       bigint  NOT NULL DEFAULT 0,
    cost_nano_usd     bigint  NOT NULL DEFAULT 0,
    plan              bytea,
    guard             bytea,
    lease_owner       text    NOT NULL DEFAULT '',
    lease_expires     bigint  NOT NULL DEFAULT 0,
    lease_epoch       bigint  NOT NULL DEFAULT 0,
    resume_after      bigint  NOT NULL DEFAULT 0,
    stop_reason       text    NOT NULL DEFAULT '',
    stop_detail       text    NOT NULL DEFAULT '',
    final             text    NOT NULL DEFAULT '',
    created_at        bigint  NOT NULL,
    updated_at        bigint  NOT NULL,
    -- changed_at is when the status or the lease last changed: claims take
    -- due runs oldest first by it. Mid-run checkpoints, which keep the lease,
    -- leave it, so that they change no indexed column and PostgreSQL updates
    -- the row in place (a HOT update, without new index entries).
    changed_at        bigint  NOT NULL,
    -- Run ids are unique across tenants: a worker names a run by its id
    -- alone. The rows of a run reference it with its tenant, so that none can
    -- sit in another tenant than its run.
    UNIQUE (tenant, id)
) WITH (fillfactor = 80); -- room on the page for HOT updates

-- Run creation is idempotent per (tenant, user, client request id); runs
-- created without a client request id are always new.
CREATE UNIQUE INDEX runs_client_request ON runs (tenant, user_id, client_request_id)
    WHERE client_request_id <> '';

-- Claims scan the runs that may be due in the order they are claimed. Runs
-- waiting for a person or finished are not in it, however many there are.
CREATE INDEX runs_due ON runs (changed_at, id)
    WHERE status IN ('queued', 'running', 'paused');

CREATE TABLE messages (
    tenant     text    NOT NULL,
    run_id     text    NOT NULL,
    seq        integer NOT NULL,
    step       integer NOT NULL,
    role       text    NOT NULL,
    content    bytea   NOT NULL,
    created_at bigint  NOT NULL,
    PRIMARY KEY (tenant, run_id, seq),
    FOREIGN KEY (tenant, run_id) REFERENCES runs (tenant, id)
);

CREATE TABLE events (
    id     bigint  NOT NULL GENERATED ALWAYS AS IDENTITY,
    tenant text    NOT NULL,
    run_id text    NOT NULL,
    step   integer NOT NULL,
    type   text    NOT NULL,
    ts     bigint  NOT NULL,
    data   bytea,
    PRIMARY KEY (tenant, run_id, id),
    FOREIGN KEY (tenant, run_id) REFERENCES runs (tenant, id)
);

CREATE TABLE effects (
    tenant     text    NOT NULL,
    key        text    NOT NULL,
    run_id     text    NOT NULL,
    tool       text    NOT NULL,
    args_hash  text    NOT NULL,
    args       bytea,
    state      text    NOT NULL CHECK (state IN ('pending', 'done', 'unknown', 'failed')),
    result     bytea,
    step       integer NOT NULL,
    attempts   integer NOT NULL,
    created_at bigint  NOT NULL,
    updated_at bigint  NOT NULL,
    PRIMARY KEY (tenant, key),
    FOREIGN KEY (tenant, run_id) REFERENCES runs (tenant, id)
);

CREATE INDEX effects_run ON effects (tenant, run_id, created_at, key);

ALTER TABLE runs ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON runs
    USING (tenant = nullif(current_setting('belay.tenant', true), ''));

ALTER TABLE messages ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON messages
    USING (tenant = nullif(current_setting('belay.tenant', true), ''));

ALTER TABLE events ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON events
    USING (tenant = nullif(current_setting('belay.tenant', true), ''));

ALTER TABLE effects ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON effects
    USING (tenant = nullif(current_setting('belay.tenant', true), ''));
