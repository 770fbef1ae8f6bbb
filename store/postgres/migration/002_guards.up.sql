-- Guards: a run's budget (its limits and what operators added), the
-- escalation packet a person acts on, the notification outbox, and the
-- kill switch.

ALTER TABLE runs ADD COLUMN budget bytea;
ALTER TABLE runs ADD COLUMN escalation bytea;

-- Notifications (approval requested, escalation, run finished) are written
-- in the transaction of the state that caused them and delivered at least
-- once from here.
CREATE TABLE outbox (
    id           bigint  NOT NULL GENERATED ALWAYS AS IDENTITY,
    tenant       text    NOT NULL,
    run_id       text    NOT NULL,
    kind         text    NOT NULL,
    payload      bytea   NOT NULL,
    created_at   bigint  NOT NULL,
    delivered_at bigint  NOT NULL DEFAULT 0,
    attempts     integer NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, id),
    FOREIGN KEY (tenant, run_id) REFERENCES runs (tenant, id)
);

CREATE INDEX outbox_run ON outbox (tenant, run_id, id);
-- A deliverer serves every tenant, oldest first.
CREATE INDEX outbox_undelivered ON outbox (id) WHERE delivered_at = 0;

-- One row per tenant; the empty tenant is the global switch.
CREATE TABLE kill_switches (
    tenant     text    NOT NULL PRIMARY KEY,
    engaged    boolean NOT NULL,
    reason     text    NOT NULL,
    updated_at bigint  NOT NULL
);

ALTER TABLE outbox ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON outbox
    USING (tenant = nullif(current_setting('belay.tenant', true), ''));

-- A tenant sees its own switch and the global one, and changes only its own.
ALTER TABLE kill_switches ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_read ON kill_switches FOR SELECT
    USING (tenant = nullif(current_setting('belay.tenant', true), '') OR tenant = '');
CREATE POLICY tenant_insert ON kill_switches FOR INSERT
    WITH CHECK (tenant = nullif(current_setting('belay.tenant', true), ''));
CREATE POLICY tenant_update ON kill_switches FOR UPDATE
    USING (tenant = nullif(current_setting('belay.tenant', true), ''));
