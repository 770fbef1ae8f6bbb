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

PRAGMA user_version = 17;
