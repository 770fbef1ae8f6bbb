-- A wait asked for again by a step run again, same tool call under another
-- id, is left as it is.
INSERT INTO waits (
    id, tenant, run_id, step, tool_use_id, kind, name, prompt, binding, status, expires_at, created_at
)
SELECT @id::text, tenant, id, @step::integer, @tool_use_id::text, @kind::text, @name::text, @prompt::bytea,
    @binding::text, 'pending', @expires_at::bigint, @now::bigint
FROM runs
WHERE id = @run_id
ON CONFLICT (tenant, run_id, tool_use_id) DO NOTHING;
