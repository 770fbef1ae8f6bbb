-- Flow control between runs. A run may name a concurrency key (the
-- customer or order it acts on) with a limit: claims keep the runs of one
-- tenant with that key that are running at once within the limit. A run
-- has a priority: higher goes first within its tenant.
ALTER TABLE runs ADD COLUMN concurrency_key text NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN concurrency_limit integer NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN priority integer NOT NULL DEFAULT 0;

-- The runs holding a key: a claim counts them for each keyed run it would
-- take. Runs without a key are not in it.
CREATE INDEX runs_key_holders ON runs (tenant, concurrency_key)
    WHERE status = 'running' AND concurrency_key <> '';

-- The keyed runs that may become due: while there is none, claims do not
-- take turns (see run_claim_keys.sql).
CREATE INDEX runs_key_waiting ON runs (tenant, concurrency_key)
    WHERE status IN ('queued', 'paused') AND concurrency_key <> '';
