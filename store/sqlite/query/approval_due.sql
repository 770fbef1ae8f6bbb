SELECT id, binding
FROM approvals
WHERE status = 'pending' AND expires_at <= @now
ORDER BY expires_at
LIMIT 100;
