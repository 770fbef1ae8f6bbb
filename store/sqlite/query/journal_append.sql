-- A row of a run's journal, after the write that counted its events in
-- the run's event count, in the same transaction. The run is read by its id
-- here rather than returned by that write: SQLite gathers RETURNING rows in
-- a table of their own, which cost more than this second look at a row the
-- write has just cached.
INSERT INTO journal (run_ref, step, at, first_message, messages, first_event, events, body)
SELECT ref, @step, @at, @first_message, @messages, event_count - @events + 1, @events, @body
FROM runs
WHERE id = @id;
