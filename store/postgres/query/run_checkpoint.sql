-- The fenced write of a checkpoint. If the fence does not match it raises
-- BL001, which aborts the checkpoint's transaction: nothing of it is written.
--
-- A zero lease_expires releases the lease: the owner is cleared so no write
-- under the old fence lands, and the epoch is kept so the next claim raises it.
-- An empty owner holds nothing: nobody writes under a released lease.
WITH old AS (
    -- The run as it was before this statement: a checkpoint appends its
    -- messages after the run's last one, never over it.
    SELECT message_count FROM runs WHERE id = @id
), fenced AS (
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
        lease_owner = CASE WHEN @lease_expires::bigint = 0 THEN '' ELSE lease_owner END,
        lease_expires = @lease_expires,
        event_count = event_count + @events,
        updated_at = @now,
        changed_at = @now
    WHERE id = @id AND lease_owner = @owner AND lease_owner <> '' AND lease_epoch = @epoch
        AND status NOT IN ('done', 'failed', 'escalated', 'canceled')
    RETURNING 1
)
SELECT CASE
    WHEN count(*) = 0 THEN raise_if(true, 'BL001', 'lease lost')
    WHEN @first_message::integer >= 0 AND (SELECT message_count FROM old) > @first_message::integer
        THEN raise_if(true, 'BL003', 'append message ' || @first_message::integer || ': it exists')
    ELSE true
END
FROM fenced;
