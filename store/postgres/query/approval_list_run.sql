-- columns: approval
-- approval_list.sql for one run, through the run's index: with the tenant
-- and the run named, the plan reads that run's approvals, not every
-- approval of its tenant (a generic plan of approval_list.sql scanned them
-- all, and parking a run cost more the more runs were parked). A null limit
-- is no limit.
SELECT id, tenant, run_id, step, tool_use_id, tool, args, args_hash, reason, category, summary,
    policy_version, binding, self_approval, status, expires_at, created_at, edited_args, edited_hash,
    decided_by, decided_at, note, parent_effect
FROM approvals
WHERE tenant = (SELECT r.tenant FROM runs r WHERE r.id = @run_id AND (@tenant = '' OR r.tenant = @tenant))
    AND run_id = @run_id
    AND (@status = '' OR status = @status)
ORDER BY created_at, seq
LIMIT @limit;
