-- columns: approval
SELECT id, tenant, run_id, step, tool_use_id, tool, args, args_hash, reason, category, summary,
    policy_version, binding, self_approval, status, expires_at, created_at, edited_args, edited_hash,
    decided_by, decided_at, note, parent_effect
FROM approvals
WHERE id = @id AND (@tenant = '' OR tenant = @tenant);
