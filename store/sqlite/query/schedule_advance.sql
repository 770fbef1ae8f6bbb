UPDATE schedules SET
    next_at = @next,
    last_run_id = CASE WHEN @run_id = '' THEN last_run_id ELSE @run_id END,
    last_fired_at = CASE WHEN @run_id = '' THEN last_fired_at ELSE @fired_at END
WHERE tenant = @tenant AND name = @name AND next_at = @from;
