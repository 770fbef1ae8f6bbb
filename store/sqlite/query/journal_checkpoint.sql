-- The journal row of a checkpoint, after its fenced update in the same
-- transaction: the run's event count already counts the row's events. The
-- run is read by its id here rather than returned by the update: SQLite
-- gathers an update's RETURNING rows in a table of their own, which cost
-- more than this second look at a row the update has just cached.
INSERT INTO journal (run_ref, step, at, first_message, messages, first_event, events, body)
SELECT ref, @step, @at, @first_message, @messages, event_count - @events + 1, @events, @body
FROM runs
WHERE id = @id;
