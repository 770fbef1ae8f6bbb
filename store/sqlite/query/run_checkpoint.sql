-- A zero lease_expires releases the lease: the owner is cleared so no write
-- under the old fence lands, and the epoch is kept so the next claim raises it.
-- An empty owner holds nothing: nobody writes under a released lease.
UPDATE runs
SET status = @status,
    step = @step,
    message_count = @message_count,
    input_tokens = @input_tokens,
    output_tokens = @output_tokens,
    model_calls = @model_calls,
    cost_nano_usd = @cost_nano_usd,
    plan = @plan,
    guard = @guard,
    resume_after = @resume_after,
    stop_reason = @stop_reason,
    stop_detail = @stop_detail,
    final = @final,
    escalation = @escalation,
    lease_owner = CASE WHEN @lease_expires = 0 THEN '' ELSE lease_owner END,
    lease_expires = @lease_expires,
    ended_at = CASE WHEN @status IN ('done', 'failed', 'escalated', 'canceled') THEN @now ELSE ended_at END,
    event_count = event_count + @events,
    updated_at = @now
WHERE id = @id AND lease_owner = @owner AND lease_owner <> '' AND lease_epoch = @epoch
    AND status NOT IN ('done', 'failed', 'escalated', 'canceled')
    -- Messages are appended after the run's last one, never over it.
    AND (@first_message < 0 OR message_count <= @first_message);
