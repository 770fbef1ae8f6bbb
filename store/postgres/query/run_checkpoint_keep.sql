-- The fenced write of a mid-run checkpoint that keeps the lease: status,
-- lease, timer and changed_at stay as they are, so no indexed column changes
-- and the row is updated in place. Raises BL001 if the fence does not match.
WITH fenced AS (
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
        updated_at = @now
    WHERE id = @id AND lease_owner = @owner AND lease_owner <> '' AND lease_epoch = @epoch
        AND status = 'running'
    RETURNING 1
)
SELECT raise_if(count(*) = 0, 'BL001', 'lease lost') FROM fenced;
