-- columns: recent_effect
-- A tenant's effects of one tool begun since a time, in runs other than
-- one, that happened, may have or may yet: what a policy totals over a
-- window. Read through effects_tool, so the cost is the window's effects.
SELECT e.run_id, coalesce(r.user_id, '') AS user_id, e.args, e.state, e.created_at
FROM effects AS e LEFT JOIN runs AS r ON r.tenant = e.tenant AND r.id = e.run_id
WHERE e.tenant = @tenant AND e.tool = @tool AND e.created_at >= @since
    AND e.run_id <> @except_run AND e.state <> 'failed'
ORDER BY e.created_at
LIMIT @limit;
