-- Schedules: runs started on a cron spec. next_at is the earliest firing
-- not yet handled (nanoseconds); workers fire the schedules whose next_at
-- has passed and move it on, each firing's run with a client request id
-- derived from the schedule and the firing's time.
CREATE TABLE schedules (
    tenant        TEXT    NOT NULL,
    name          TEXT    NOT NULL,
    agent         TEXT    NOT NULL,
    spec          TEXT    NOT NULL,
    input         TEXT    NOT NULL,
    overlap       TEXT    NOT NULL,
    missed        TEXT    NOT NULL,
    next_at       INTEGER NOT NULL,
    last_run_id   TEXT    NOT NULL DEFAULT '',
    last_fired_at INTEGER NOT NULL DEFAULT 0,
    created_by    TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (tenant, name)
) STRICT;
CREATE INDEX schedules_due ON schedules (next_at);

PRAGMA user_version = 16;
