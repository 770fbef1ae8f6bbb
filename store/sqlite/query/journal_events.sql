-- columns: journal
-- The rows of a run's journal that hold events numbered above @after, in
-- the order written, found through the run's index from the row that holds
-- the first of them.
SELECT r.id AS run_id, j.step, j.at, j.first_message, j.messages, j.first_event, j.events, j.body
FROM runs r JOIN journal j ON j.run_ref = r.ref
WHERE r.id = @run_id AND j.first_event + j.events > @after + 1 AND j.events > 0
ORDER BY j.first_event + j.events, j.id;
