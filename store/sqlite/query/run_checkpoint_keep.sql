-- A mid-run checkpoint: status, lease and timer stay as they are, so the
-- columns the claim indexes cover are not rewritten.
UPDATE runs
SET step = @step,
    message_count = @message_count,
    input_tokens = @input_tokens,
    output_tokens = @output_tokens,
    model_calls = @model_calls,
    cost_nano_usd = @cost_nano_usd,
    plan = @plan,
    guard = @guard,
    stop_reason = @stop_reason,
    stop_detail = @stop_detail,
    final = @final,
    escalation = @escalation,
    event_count = event_count + @events,
    updated_at = @now
WHERE id = @id AND lease_owner = @owner AND lease_owner <> '' AND lease_epoch = @epoch
    AND status = 'running'
    -- Messages are appended after the run's last one, never over it.
    AND (@first_message < 0 OR message_count <= @first_message);
