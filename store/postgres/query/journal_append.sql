-- Appends one row to a run's journal outside a checkpoint: its events are
-- numbered after every event the run has, the run's count raised under its
-- row lock in the same statement.
WITH grown AS (
    UPDATE runs
    SET event_count = event_count + @events
    WHERE id = @run_id::text
    RETURNING tenant, id, event_count
)
INSERT INTO journal (tenant, run_id, step, at, first_message, messages, first_event, events, body)
SELECT g.tenant, g.id, @step, @at, @first_message, @messages, g.event_count - @events + 1, @events, @body
FROM grown g;
