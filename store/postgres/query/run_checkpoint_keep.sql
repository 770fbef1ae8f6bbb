-- The fenced write of a mid-run checkpoint that keeps the lease: status,
-- lease, timer and changed_at stay as they are, so no indexed column changes
-- and the row is updated in place. Raises BL001 if the fence does not match.
WITH old AS (
    -- The run as it was before this statement: a checkpoint appends its
    -- messages after the run's last one, never over it.
    SELECT message_count FROM runs WHERE id = @id
), fenced AS (
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
    RETURNING 1
)
SELECT CASE
    WHEN count(*) = 0 THEN raise_if(true, 'BL001', 'lease lost')
    WHEN @first_message::integer >= 0 AND (SELECT message_count FROM old) > @first_message::integer
        THEN raise_if(true, 'BL003', 'append message ' || @first_message::integer || ': it exists')
    ELSE true
END
FROM fenced;
