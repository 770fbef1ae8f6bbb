-- Every tenant's sessions that have expired at @now, as session_get.sql
-- finds them: a session lives while expires_at > @now.
DELETE FROM sessions WHERE expires_at <= @now;
