-- Tools' circuit breakers, shared by every worker of the store: a breaker
-- one worker opens is open for all. Times are unix nanoseconds; a tool
-- without a row has a closed breaker. failures counts, while closed, the
-- failures since window_start; an open breaker may be probed from
-- open_until, by one worker at a time (probe_owner, until probe_until).
CREATE TABLE breakers (
    name         TEXT NOT NULL PRIMARY KEY,
    state        TEXT NOT NULL CHECK (state IN ('closed', 'open', 'half_open')),
    failures     INTEGER NOT NULL,
    window_start INTEGER NOT NULL,
    open_until   INTEGER NOT NULL,
    probe_owner  TEXT NOT NULL,
    probe_until  INTEGER NOT NULL,
    changed_at   INTEGER NOT NULL
) STRICT;

-- Tenants' spend caps: the most a tenant's runs may spend together on
-- models in a UTC day or month. A tenant without a row has no cap.
CREATE TABLE spend_caps (
    tenant       TEXT NOT NULL PRIMARY KEY,
    period       TEXT NOT NULL CHECK (period IN ('day', 'month')),
    max_nano_usd INTEGER NOT NULL
) STRICT;

-- What each capped tenant's runs spent in a window (its start, in unix
-- nanoseconds), added to after every model call: the cap is checked
-- against it before the next.
CREATE TABLE tenant_spend (
    tenant       TEXT NOT NULL,
    window_start INTEGER NOT NULL,
    nano_usd     INTEGER NOT NULL,
    PRIMARY KEY (tenant, window_start)
) STRICT;

PRAGMA user_version = 19;
