-- Times are integer unix nanoseconds in UTC, 0 for the zero time, so that
-- ordering and comparisons are exact. JSON is stored as the bytes given.

CREATE TABLE runs (
    id                TEXT    NOT NULL PRIMARY KEY,
    tenant            TEXT    NOT NULL,
    user_id           TEXT    NOT NULL,
    client_request_id TEXT    NOT NULL,
    agent             TEXT    NOT NULL,
    agent_version     TEXT    NOT NULL,
    input             TEXT    NOT NULL,
    dry_run           INTEGER NOT NULL,
    status            TEXT    NOT NULL CHECK (status IN (
        'queued', 'running', 'waiting_approval', 'paused',
        'done', 'failed', 'escalated', 'canceled')),
    step              INTEGER NOT NULL DEFAULT 0,
    message_count     INTEGER NOT NULL DEFAULT 0,
    input_tokens      INTEGER NOT NULL DEFAULT 0,
    output_tokens     INTEGER NOT NULL DEFAULT 0,
    model_calls       INTEGER NOT NULL DEFAULT 0,
    cost_nano_usd     INTEGER NOT NULL DEFAULT 0,
    plan              BLOB,
    guard             BLOB,
    lease_owner       TEXT    NOT NULL DEFAULT '',
    lease_expires     INTEGER NOT NULL DEFAULT 0,
    lease_epoch       INTEGER NOT NULL DEFAULT 0,
    resume_after      INTEGER NOT NULL DEFAULT 0,
    stop_reason       TEXT    NOT NULL DEFAULT '',
    stop_detail       TEXT    NOT NULL DEFAULT '',
    final             TEXT    NOT NULL DEFAULT '',
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) STRICT;

-- Run creation is idempotent per (tenant, user, client request id); runs
-- created without a client request id are always new.
CREATE UNIQUE INDEX runs_client_request ON runs (tenant, user_id, client_request_id)
    WHERE client_request_id <> '';

CREATE INDEX runs_status_lease ON runs (status, lease_expires);
CREATE INDEX runs_status_resume ON runs (status, resume_after);
CREATE INDEX runs_tenant_created ON runs (tenant, created_at);

CREATE TABLE messages (
    run_id     TEXT    NOT NULL REFERENCES runs (id),
    seq        INTEGER NOT NULL,
    step       INTEGER NOT NULL,
    role       TEXT    NOT NULL,
    content    BLOB    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (run_id, seq)
) STRICT, WITHOUT ROWID;

CREATE TABLE events (
    -- Not AUTOINCREMENT: rowids already grow as events are appended (a
    -- prune of the newest ended runs may free ids for reuse, which no reader
    -- minds: a run's events still grow), and AUTOINCREMENT costs a write to
    -- sqlite_sequence per event.
    id     INTEGER NOT NULL PRIMARY KEY,
    run_id TEXT    NOT NULL REFERENCES runs (id),
    step   INTEGER NOT NULL,
    type   TEXT    NOT NULL,
    ts     INTEGER NOT NULL,
    data   BLOB
) STRICT;

CREATE INDEX events_run ON events (run_id, id);

CREATE TABLE effects (
    tenant     TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    run_id     TEXT    NOT NULL REFERENCES runs (id),
    tool       TEXT    NOT NULL,
    args_hash  TEXT    NOT NULL,
    args       BLOB,
    state      TEXT    NOT NULL CHECK (state IN ('pending', 'done', 'unknown', 'failed')),
    result     BLOB,
    step       INTEGER NOT NULL,
    attempts   INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, key)
) STRICT, WITHOUT ROWID;

CREATE INDEX effects_run ON effects (run_id, created_at, key);

-- 0x424c4159, "BLAY": marks the file as Belay's. Must equal applicationID.
PRAGMA application_id = 1112293721;
PRAGMA user_version = 1;
