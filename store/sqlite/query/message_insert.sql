-- The last line is one message; insertMessages repeats it for each message
-- it appends in one statement. An unknown run id fails: run_ref is NOT NULL.
INSERT INTO messages (run_ref, seq, step, role, content, created_at) VALUES
((SELECT ref FROM runs WHERE id = ?), ?, ?, ?, ?, ?)
