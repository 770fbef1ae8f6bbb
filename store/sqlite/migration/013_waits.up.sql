-- Waits: what a run waits for from outside it (the user's reply to a
-- question, a named event), beside the approvals a person decides. A run that waits is
-- waiting_input.
--
-- The runs table's CHECK on status gains waiting_input. SQLite cannot alter
-- a CHECK, and rebuilding runs would rewrite every run and the references
-- to it; the CHECK only widens, which every row already meets, so its text
-- is changed in the schema, as SQLite's documentation allows for a change
-- that leaves the stored data valid (ALTER TABLE, "Making Other Kinds Of
-- Table Schema Changes"). RESET reloads the schema of this connection; the
-- CREATE TABLE below changes the schema cookie, so every other connection
-- reloads it too.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
SET sql = replace(sql, '''waiting_approval'', ', '''waiting_approval'', ''waiting_input'', ')
WHERE type = 'table' AND name = 'runs' AND instr(sql, '''waiting_input''') = 0;
PRAGMA writable_schema = RESET;

CREATE TABLE waits (
    id          TEXT    NOT NULL PRIMARY KEY,
    tenant      TEXT    NOT NULL,
    run_id      TEXT    NOT NULL REFERENCES runs (id),
    step        INTEGER NOT NULL,
    tool_use_id TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    prompt      BLOB    NOT NULL,
    binding     TEXT    NOT NULL,
    status      TEXT    NOT NULL CHECK (status IN ('pending', 'answered', 'expired')),
    expires_at  INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    answer      BLOB,
    answer_key  TEXT    NOT NULL DEFAULT '',
    answered_by TEXT    NOT NULL DEFAULT '',
    answered_at INTEGER NOT NULL DEFAULT 0
) STRICT;

-- A step run again asks with the same tool call: it finds this row.
CREATE UNIQUE INDEX waits_call ON waits (tenant, run_id, tool_use_id);
CREATE INDEX waits_run ON waits (run_id, created_at);
-- An answer repeated under its idempotency key finds the wait it answered.
CREATE UNIQUE INDEX waits_answer_key ON waits (run_id, answer_key) WHERE answer_key <> '';
-- The durable timer: pending waits by expiry.
CREATE INDEX waits_expiry ON waits (expires_at) WHERE status = 'pending';

-- Signals: named events sent to a run. One that comes before the run waits
-- for it is kept (consumed_by empty) and consumed when the wait begins.
CREATE TABLE signals (
    id          TEXT    NOT NULL PRIMARY KEY,
    tenant      TEXT    NOT NULL,
    run_id      TEXT    NOT NULL REFERENCES runs (id),
    name        TEXT    NOT NULL,
    key         TEXT    NOT NULL DEFAULT '',
    payload     BLOB    NOT NULL,
    created_at  INTEGER NOT NULL,
    consumed_by TEXT    NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX signals_kept ON signals (run_id, name, created_at) WHERE consumed_by = '';
CREATE INDEX signals_run ON signals (run_id, created_at);
-- A signal sent again under its idempotency key finds the first.
CREATE UNIQUE INDEX signals_key ON signals (run_id, key) WHERE key <> '';

PRAGMA user_version = 13;
