-- The journal row of a checkpoint, after its fenced update in the same
-- transaction: the run's event count already counts the row's events.
INSERT INTO journal (tenant, run_id, step, at, first_message, messages, first_event, events, body)
SELECT tenant, id, @step, @at, @first_message, @messages, event_count - @events + 1, @events, @body
FROM runs
WHERE id = @run_id::text;
