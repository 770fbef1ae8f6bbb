-- Claims take the oldest queued runs in this index's order instead of
-- sorting every queued run for each claim. A run leaves it when claimed.
CREATE INDEX runs_queued ON runs (updated_at, id) WHERE status = 'queued';

PRAGMA user_version = 5;
