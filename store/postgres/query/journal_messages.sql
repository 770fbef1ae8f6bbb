-- columns: journal
-- The rows of a run's journal that hold messages, in the order written.
SELECT run_id, step, at, first_message, messages, first_event, events, body
FROM journal
WHERE tenant = (SELECT tenant FROM runs WHERE id = @run_id) AND run_id = @run_id AND messages > 0
ORDER BY next_event, id;
