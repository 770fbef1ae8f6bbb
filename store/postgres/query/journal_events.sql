-- columns: journal
-- The rows of a run's journal that hold events numbered above @after, in
-- the order written.
SELECT run_id, step, at, first_message, messages, first_event, events, body
FROM journal
WHERE tenant = (SELECT tenant FROM runs WHERE id = @run_id) AND run_id = @run_id AND events > 0
    AND first_event + events - 1 > @after
ORDER BY id;
