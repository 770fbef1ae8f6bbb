INSERT INTO run_lineage (tenant, run_id, parent_run_id, at_step, forked_by, reason, created_at)
VALUES (@tenant::text, @run_id::text, @parent_run_id::text, @at_step::integer, @forked_by::text, @reason::text, @now::bigint);
