-- Guards: a run's budget (its limits and what operators added), the
-- escalation packet a person acts on, the notification outbox, and the
-- kill switch.

ALTER TABLE runs ADD COLUMN budget BLOB;
ALTER TABLE runs ADD COLUMN escalation BLOB;

-- Notifications (approval requested, escalation, run finished) are written
-- in the transaction of the state that caused them and delivered at least
-- once from here.
CREATE TABLE outbox (
    id           INTEGER NOT NULL PRIMARY KEY,
    tenant       TEXT    NOT NULL,
    run_id       TEXT    NOT NULL REFERENCES runs (id),
    kind         TEXT    NOT NULL,
    payload      BLOB    NOT NULL,
    created_at   INTEGER NOT NULL,
    delivered_at INTEGER NOT NULL DEFAULT 0,
    attempts     INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX outbox_undelivered ON outbox (delivered_at, id);
CREATE INDEX outbox_run ON outbox (run_id, id);

-- One row per tenant; the empty tenant is the global switch.
CREATE TABLE kill_switches (
    tenant     TEXT    NOT NULL PRIMARY KEY,
    engaged    INTEGER NOT NULL,
    reason     TEXT    NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

PRAGMA user_version = 2;
