INSERT INTO run_lineage (run_id, tenant, parent_run_id, at_step, forked_by, reason, created_at)
VALUES (@run_id, @tenant, @parent_run_id, @at_step, @forked_by, @reason, @now);
