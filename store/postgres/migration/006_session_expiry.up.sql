-- Expired sessions are deleted, every tenant's at once, whenever someone
-- signs in: this index finds them without reading every session, ended or
-- not. Sessions are few and short-lived, so building it locks the table for
-- a moment only.
CREATE INDEX sessions_expiry ON sessions (expires_at);
