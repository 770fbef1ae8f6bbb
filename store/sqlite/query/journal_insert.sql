-- One row of a run's journal: what one write appends to its messages and
-- its trace.
INSERT INTO journal (run_ref, step, at, first_message, messages, first_event, events, body)
VALUES (@ref, @step, @at, @first_message, @messages, @first_event, @events, @body);
