-- Every tenant's sessions that have expired at @now, as session_get.sql
-- finds them: a session lives while expires_at > @now. It runs as the owner,
-- since the application role never deletes. The rows of sessions ended
-- before they expired go too, uncounted: to the store they were gone already,
-- as they are in SQLite, which deletes a session when it ends.
WITH deleted AS (
    DELETE FROM sessions
    WHERE expires_at <= @now
    RETURNING ended
)
SELECT count(*) FILTER (WHERE NOT ended) FROM deleted;
