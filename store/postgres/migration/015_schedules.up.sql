-- Schedules: runs started on a cron spec. next_at is the earliest firing
-- not yet handled (nanoseconds); workers fire the schedules whose next_at
-- has passed and move it on, each firing's run with a client request id
-- derived from the schedule and the firing's time.
CREATE TABLE schedules (
    tenant        text    NOT NULL,
    name          text    NOT NULL,
    agent         text    NOT NULL,
    spec          text    NOT NULL,
    input         text    NOT NULL,
    overlap       text    NOT NULL,
    missed        text    NOT NULL,
    next_at       bigint  NOT NULL,
    last_run_id   text    NOT NULL DEFAULT '',
    last_fired_at bigint  NOT NULL DEFAULT 0,
    created_by    text    NOT NULL,
    created_at    bigint  NOT NULL,
    PRIMARY KEY (tenant, name)
);
CREATE INDEX schedules_due ON schedules (next_at);

ALTER TABLE schedules ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON schedules
    USING (tenant = nullif(current_setting('belay.tenant', true), ''));
