-- columns: approval
-- A decision is taken once, on a pending approval that has not expired
-- (the expiry itself is the one decision allowed after that).
UPDATE approvals
SET status = @status,
    edited_args = @edited_args,
    edited_hash = @edited_hash,
    decided_by = @by,
    decided_at = @now,
    note = @note
WHERE id = @id AND status = 'pending' AND binding = @binding
    AND (@status = 'expired' OR expires_at > @now)
RETURNING id, tenant, run_id, step, tool_use_id, tool, args, args_hash, reason, category, summary,
    policy_version, binding, self_approval, status, expires_at, created_at, edited_args, edited_hash,
    decided_by, decided_at, note, parent_effect;
