-- The last line is one message; insertMessages repeats it for each message
-- it appends in one statement.
INSERT INTO messages (run_id, seq, step, role, content, created_at) VALUES
(?, ?, ?, ?, ?, ?)
