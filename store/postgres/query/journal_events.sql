-- columns: journal
-- The rows of a run's journal that hold events numbered above @after, in
-- the order written, found through the key from the row that holds the
-- first of them.
SELECT run_id, step, at, first_message, messages, first_event, events, body
FROM journal
WHERE tenant = (SELECT tenant FROM runs WHERE id = @run_id) AND run_id = @run_id
    AND next_event > @after::bigint + 1 AND events > 0
ORDER BY next_event, id;
