-- The last line is one event; insertEvents repeats it for each event it
-- appends in one statement.
INSERT INTO events (run_id, step, type, ts, data) VALUES
(?, ?, ?, ?, ?)
