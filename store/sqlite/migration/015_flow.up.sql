-- Flow control between runs. A run may name a concurrency key (the
-- customer or order it acts on) with a limit: claims keep the runs of one
-- tenant with that key that are running at once within the limit. A run
-- has a priority: higher goes first within its tenant, and tenants take
-- turns.
ALTER TABLE runs ADD COLUMN concurrency_key TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN concurrency_limit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;

-- The running runs, by tenant and key: a claim counts a tenant's share of
-- the workers, and a key's holders, for each run it would take.
CREATE INDEX runs_running ON runs (tenant, concurrency_key) WHERE status = 'running';

-- Queued runs, by tenant in the order a claim takes them: a claim skips
-- from tenant to tenant and reads each tenant's first runs.
DROP INDEX runs_queued;
CREATE INDEX runs_queued_fair ON runs (tenant, priority DESC, updated_at, id) WHERE status = 'queued';

-- Rate buckets every worker of the store shares: a provider account's
-- requests and tokens per minute, or any named limit. tokens is the level
-- at updated_at (unix nanoseconds); the bucket refills from there at the
-- rate its takers give. A provider's Retry-After drains it until
-- blocked_until.
CREATE TABLE rate_buckets (
    name          TEXT NOT NULL PRIMARY KEY,
    tokens        REAL NOT NULL,
    updated_at    INTEGER NOT NULL,
    blocked_until INTEGER NOT NULL
) STRICT;

-- The most runs of a tenant in a step at once, across every worker: a claim
-- takes none of the tenant's queued or paused runs while it has as many
-- running. A tenant without a row has no cap.
CREATE TABLE tenant_limits (
    tenant      TEXT NOT NULL PRIMARY KEY,
    max_running INTEGER NOT NULL
) STRICT;

PRAGMA user_version = 15;
