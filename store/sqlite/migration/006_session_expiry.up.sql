-- Expired sessions are deleted, every tenant's at once, whenever someone
-- signs in: this index finds them without reading every session.
CREATE INDEX sessions_expiry ON sessions (expires_at);

PRAGMA user_version = 6;
