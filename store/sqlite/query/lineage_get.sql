-- columns: lineage
SELECT run_id, tenant, parent_run_id, at_step, forked_by, reason, created_at
FROM run_lineage
WHERE run_id = @run_id AND (@tenant = '' OR tenant = @tenant);
