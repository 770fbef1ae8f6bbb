-- Access: who asked for a run and whether its requester may decide its
-- approvals, API keys and console sessions, and webhooks with their
-- deliveries. Keys, sessions and webhooks are listed in creation order, ties
-- in insertion order (seq), as approvals are.

ALTER TABLE runs ADD COLUMN requested_by text NOT NULL DEFAULT '';
ALTER TABLE approvals ADD COLUMN self_approval boolean NOT NULL DEFAULT false;

-- Only the hash of a key's secret is stored.
CREATE TABLE api_keys (
    -- Key ids are unique across tenants: the server finds a key by its id
    -- before it knows the tenant.
    id          text    NOT NULL PRIMARY KEY,
    seq         bigint  NOT NULL GENERATED ALWAYS AS IDENTITY,
    tenant      text    NOT NULL,
    name        text    NOT NULL,
    roles       text[]  NOT NULL,
    secret_hash text    NOT NULL,
    created_at  bigint  NOT NULL,
    revoked_at  bigint  NOT NULL DEFAULT 0,
    UNIQUE (tenant, id)
);

CREATE INDEX api_keys_tenant ON api_keys (tenant, created_at, seq);

-- Only the hash of a session's token is stored. A session that ends is
-- marked, not deleted: revoking a key ends its sessions as the key's tenant,
-- and the application role never deletes.
CREATE TABLE sessions (
    token_hash text    NOT NULL PRIMARY KEY,
    tenant     text    NOT NULL,
    key_id     text    NOT NULL,
    created_at bigint  NOT NULL,
    expires_at bigint  NOT NULL,
    ended      boolean NOT NULL DEFAULT false,
    FOREIGN KEY (tenant, key_id) REFERENCES api_keys (tenant, id)
);

CREATE INDEX sessions_key ON sessions (key_id) WHERE NOT ended;

-- kinds lists the outbox kinds an endpoint takes; empty takes every kind.
CREATE TABLE webhooks (
    -- Webhook ids are unique across tenants, as run ids are.
    id          text    NOT NULL PRIMARY KEY,
    seq         bigint  NOT NULL GENERATED ALWAYS AS IDENTITY,
    tenant      text    NOT NULL,
    url         text    NOT NULL,
    secret      text    NOT NULL,
    kinds       text[]  NOT NULL,
    created_at  bigint  NOT NULL,
    disabled_at bigint  NOT NULL DEFAULT 0,
    UNIQUE (tenant, id)
);

CREATE INDEX webhooks_tenant ON webhooks (tenant, created_at, seq);

-- One outbox message on its way to one webhook. From here on
-- outbox.delivered_at marks a message as fanned out to the webhooks of its
-- tenant; its deliveries carry on from there.
CREATE TABLE deliveries (
    -- The idempotency key a receiver sees on every attempt.
    id              text    NOT NULL PRIMARY KEY,
    seq             bigint  NOT NULL GENERATED ALWAYS AS IDENTITY,
    tenant          text    NOT NULL,
    webhook_id      text    NOT NULL,
    outbox_id       bigint  NOT NULL,
    run_id          text    NOT NULL,
    kind            text    NOT NULL,
    state           text    NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at bigint  NOT NULL,
    lease_owner     text    NOT NULL DEFAULT '',
    lease_expires   bigint  NOT NULL DEFAULT 0,
    last_error      text    NOT NULL DEFAULT '',
    created_at      bigint  NOT NULL,
    delivered_at    bigint  NOT NULL DEFAULT 0,
    -- A message reaches each webhook once, however many senders fan out.
    UNIQUE (outbox_id, webhook_id),
    FOREIGN KEY (tenant, webhook_id) REFERENCES webhooks (tenant, id),
    FOREIGN KEY (tenant, outbox_id) REFERENCES outbox (tenant, id),
    FOREIGN KEY (tenant, run_id) REFERENCES runs (tenant, id)
);

-- Senders serve every tenant, oldest first; delivered and failed
-- deliveries are not in it, however many there are.
CREATE INDEX deliveries_due ON deliveries (created_at, seq) WHERE state = 'pending';
CREATE INDEX deliveries_run ON deliveries (tenant, run_id, created_at, seq);
CREATE INDEX deliveries_webhook ON deliveries (tenant, webhook_id, created_at, seq);

ALTER TABLE api_keys ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON api_keys
    USING (tenant = nullif(current_setting('belay.tenant', true), ''));

ALTER TABLE sessions ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON sessions
    USING (tenant = nullif(current_setting('belay.tenant', true), ''));

ALTER TABLE webhooks ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON webhooks
    USING (tenant = nullif(current_setting('belay.tenant', true), ''));

ALTER TABLE deliveries ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON deliveries
    USING (tenant = nullif(current_setting('belay.tenant', true), ''));

-- Notifications written before webhooks existed had no endpoint to go to:
-- they count as dispatched, so a webhook created later does not receive a
-- backlog of old news.
UPDATE outbox SET delivered_at = created_at WHERE delivered_at = 0;
