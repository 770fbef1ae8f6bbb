-- columns: journal
-- The rows of a run's journal that hold messages, in the order written.
SELECT r.id AS run_id, j.step, j.at, j.first_message, j.messages, j.first_event, j.events, j.body
FROM runs r JOIN journal j ON j.run_ref = r.ref
WHERE r.id = @run_id AND j.messages > 0
ORDER BY j.first_event + j.events, j.id;
