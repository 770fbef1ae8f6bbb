-- columns: lineage
SELECT run_id, tenant, parent_run_id, at_step, forked_by, reason, created_at
FROM run_lineage
WHERE parent_run_id = @parent_run_id::text AND (@tenant::text = '' OR tenant = @tenant::text)
ORDER BY created_at, run_id;
