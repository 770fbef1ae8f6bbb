-- Caps and start rates across every worker of the store. A tenant's runs
-- may start (be claimed out of the queue) at most starts_per_minute a
-- minute, 0 for no limit; an agent's runs likewise, and at most
-- max_running of them in a step at once, 0 for no cap. A start rate is
-- kept as a rate bucket (rate_buckets, named starts:tenant:T or
-- starts:agent:A) that claims take from. An agent without a row has no cap.
ALTER TABLE tenant_limits ADD COLUMN starts_per_minute REAL NOT NULL DEFAULT 0;

CREATE TABLE agent_limits (
    agent             TEXT NOT NULL PRIMARY KEY,
    max_running       INTEGER NOT NULL,
    starts_per_minute REAL NOT NULL
) STRICT;

-- The running runs of an agent: a claim counts them for its cap.
CREATE INDEX runs_running_agent ON runs (agent) WHERE status = 'running';

-- A tenant's effects by tool and time: a policy totals a field over the
-- effects of a window, across runs (store.EffectHistory).
CREATE INDEX effects_tool ON effects (tenant, tool, created_at);

PRAGMA user_version = 17;
