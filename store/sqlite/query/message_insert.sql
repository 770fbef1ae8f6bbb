INSERT INTO messages (run_id, seq, step, role, content, created_at)
VALUES (@run_id, @seq, @step, @role, @content, @created_at);
