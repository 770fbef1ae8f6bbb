-- A write that appends events to a run outside a checkpoint numbers them
-- after every event the run has: it raises the run's count in the same
-- transaction, and gets the run's ref and the new count back.
UPDATE runs
SET event_count = event_count + @events
WHERE id = @id
RETURNING ref, event_count;
