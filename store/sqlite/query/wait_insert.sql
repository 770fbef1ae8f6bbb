INSERT INTO waits (
    id, tenant, run_id, step, tool_use_id, kind, name, prompt, binding, status, expires_at, created_at
)
SELECT @id, tenant, @run_id, @step, @tool_use_id, @kind, @name, @prompt, @binding, 'pending', @expires_at, @now
FROM runs WHERE id = @run_id
ON CONFLICT (tenant, run_id, tool_use_id) DO NOTHING;
