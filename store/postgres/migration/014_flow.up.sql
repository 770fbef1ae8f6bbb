-- Flow control between runs. A run may name a concurrency key (the
-- customer or order it acts on) with a limit: claims keep the runs of one
-- tenant with that key that are running at once within the limit. A run
-- has a priority: higher goes first within its tenant, and tenants take
-- turns.
ALTER TABLE runs ADD COLUMN concurrency_key text NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN concurrency_limit integer NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN priority integer NOT NULL DEFAULT 0;

-- The running runs, by tenant and key: a claim counts a tenant's share of
-- the workers, and a key's holders, for each run it would take.
CREATE INDEX runs_running ON runs (tenant, concurrency_key) WHERE status = 'running';

-- The keyed runs that may become due: while there is none, claims do not
-- take turns (see run_claim_keys.sql).
CREATE INDEX runs_key_waiting ON runs (tenant, concurrency_key)
    WHERE status IN ('queued', 'paused') AND concurrency_key <> '';

-- Queued runs, by tenant in the order a claim takes them: a claim skips
-- from tenant to tenant and reads each tenant's first runs. The runs that
-- started before and may be due again (running on a lease that may expire,
-- paused until a time) are read in the order they changed, in an index of
-- their own, so that a claim does not walk past every queued run to find
-- them: it replaces runs_due, which held the queued runs too.
CREATE INDEX runs_queued_fair ON runs (tenant, priority DESC, changed_at, id) WHERE status = 'queued';
CREATE INDEX runs_due_again ON runs (changed_at, id) WHERE status IN ('running', 'paused');
DROP INDEX runs_due;

-- Rate buckets every worker of the store shares: a provider account's
-- requests and tokens per minute, or any named limit. tokens is the level
-- at updated_at (unix nanoseconds); the bucket refills from there at the
-- rate its takers give. A provider's Retry-After drains it until
-- blocked_until.
CREATE TABLE rate_buckets (
    name          text NOT NULL PRIMARY KEY,
    tokens        double precision NOT NULL,
    updated_at    bigint NOT NULL,
    blocked_until bigint NOT NULL
);

-- The most runs of a tenant in a step at once, across every worker: a claim
-- takes none of the tenant's queued or paused runs while it has as many
-- running. A tenant without a row has no cap.
CREATE TABLE tenant_limits (
    tenant      text NOT NULL PRIMARY KEY,
    max_running integer NOT NULL
);
