-- A write that appends events to a run outside a checkpoint numbers them
-- after every event the run has: it raises the run's count in the same
-- transaction, and journal_append.sql numbers the row's events from it.
UPDATE runs
SET event_count = event_count + @events
WHERE id = @id;
