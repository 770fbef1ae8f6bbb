-- Tools' circuit breakers, shared by every worker of the store: a breaker
-- one worker opens is open for all. Times are unix nanoseconds; a tool
-- without a row has a closed breaker. failures counts, while closed, the
-- failures since window_start; an open breaker may be probed from
-- open_until, by one worker at a time (probe_owner, until probe_until).
CREATE TABLE breakers (
    name         text    NOT NULL PRIMARY KEY,
    state        text    NOT NULL CHECK (state IN ('closed', 'open', 'half_open')),
    failures     integer NOT NULL,
    window_start bigint  NOT NULL,
    open_until   bigint  NOT NULL,
    probe_owner  text    NOT NULL,
    probe_until  bigint  NOT NULL,
    changed_at   bigint  NOT NULL
);

-- Tenants' spend caps: the most a tenant's runs may spend together on
-- models in a UTC day or month. A tenant without a row has no cap.
CREATE TABLE spend_caps (
    tenant       text   NOT NULL PRIMARY KEY,
    period       text   NOT NULL CHECK (period IN ('day', 'month')),
    max_nano_usd bigint NOT NULL
);

-- What each capped tenant's runs spent in a window (its start, in unix
-- nanoseconds), added to after every model call: the cap is checked
-- against it before the next.
CREATE TABLE tenant_spend (
    tenant       text   NOT NULL,
    window_start bigint NOT NULL,
    nano_usd     bigint NOT NULL,
    PRIMARY KEY (tenant, window_start)
);

ALTER TABLE spend_caps ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON spend_caps
    USING (tenant = nullif(current_setting('belay.tenant', true), ''));

ALTER TABLE tenant_spend ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON tenant_spend
    USING (tenant = nullif(current_setting('belay.tenant', true), ''));
