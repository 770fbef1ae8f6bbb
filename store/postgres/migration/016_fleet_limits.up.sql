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
