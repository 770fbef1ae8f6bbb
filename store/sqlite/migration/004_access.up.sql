-- Access: who asked for a run and whether its requester may approve it, API
-- keys and console sessions, and webhooks with their deliveries.

ALTER TABLE runs ADD COLUMN requested_by TEXT NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN self_approval INTEGER NOT NULL DEFAULT 0;

-- Only the hash of a key's secret is stored. roles is comma-separated.
CREATE TABLE api_keys (
    id          TEXT    NOT NULL PRIMARY KEY,
    tenant      TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    roles       TEXT    NOT NULL,
    secret_hash TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX api_keys_tenant ON api_keys (tenant, created_at);

-- Only the hash of a session's token is stored.
CREATE TABLE sessions (
    token_hash TEXT    NOT NULL PRIMARY KEY,
    key_id     TEXT    NOT NULL REFERENCES api_keys (id),
    tenant     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE INDEX sessions_key ON sessions (key_id);

-- kinds is a JSON array of outbox kinds; empty delivers every kind.
CREATE TABLE webhooks (
    id          TEXT    NOT NULL PRIMARY KEY,
    tenant      TEXT    NOT NULL,
    url         TEXT    NOT NULL,
    secret      TEXT    NOT NULL,
    kinds       TEXT    NOT NULL DEFAULT '[]',
    created_at  INTEGER NOT NULL,
    disabled_at INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX webhooks_tenant ON webhooks (tenant, created_at);

-- One outbox message on its way to one webhook. outbox.delivered_at now
-- marks a message as fanned out to the webhooks of its tenant; the
-- deliveries carry on from there. Listed in creation order, ties by rowid.
CREATE TABLE deliveries (
    id              TEXT    NOT NULL PRIMARY KEY,
    tenant          TEXT    NOT NULL,
    webhook_id      TEXT    NOT NULL REFERENCES webhooks (id),
    outbox_id       INTEGER NOT NULL REFERENCES outbox (id),
    run_id          TEXT    NOT NULL REFERENCES runs (id),
    kind            TEXT    NOT NULL,
    state           TEXT    NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    lease_owner     TEXT    NOT NULL DEFAULT '',
    lease_expires   INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT    NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    delivered_at    INTEGER NOT NULL DEFAULT 0
) STRICT;

-- A message reaches each webhook once.
CREATE UNIQUE INDEX deliveries_message ON deliveries (outbox_id, webhook_id);
-- The claim reads only pending deliveries.
CREATE INDEX deliveries_due ON deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX deliveries_webhook ON deliveries (webhook_id, state);
CREATE INDEX deliveries_run ON deliveries (run_id, created_at);
CREATE INDEX deliveries_tenant ON deliveries (tenant, created_at);

-- Notifications written before webhooks existed had no endpoint to go to:
-- they count as dispatched, so a webhook created later does not receive a
-- backlog of old news.
UPDATE outbox SET delivered_at = created_at WHERE delivered_at = 0;

PRAGMA user_version = 4;
