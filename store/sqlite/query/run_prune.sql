-- Deletes an ended run, whose rows run_prune_owned.sql deleted first. The
-- status is checked again: a run that has not ended is never deleted.
DELETE FROM runs WHERE id = @id AND status IN ('done', 'failed', 'escalated', 'canceled');
