-- The last line is one event; insertEvents repeats it for each event it
-- appends in one statement. An unknown run id fails: run_ref is NOT NULL.
INSERT INTO events (run_ref, step, type, ts, data) VALUES
((SELECT ref FROM runs WHERE id = ?), ?, ?, ?, ?)
