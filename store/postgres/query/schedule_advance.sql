UPDATE schedules SET
    next_at = @next::bigint,
    last_run_id = CASE WHEN @run_id::text = '' THEN last_run_id ELSE @run_id::text END,
    last_fired_at = CASE WHEN @run_id::text = '' THEN last_fired_at ELSE @fired_at::bigint END
WHERE tenant = @tenant::text AND name = @name::text AND next_at = @from::bigint;
