-- Deletes what an ended run owns, before the run itself (foreign keys).
DELETE FROM journal WHERE run_ref = @ref;
DELETE FROM effects WHERE run_id = @id;
DELETE FROM approvals WHERE run_id = @id;
DELETE FROM waits WHERE run_id = @id;
DELETE FROM signals WHERE run_id = @id;
DELETE FROM deliveries WHERE run_id = @id;
DELETE FROM outbox WHERE run_id = @id;
DELETE FROM run_lineage WHERE run_id = @id;
