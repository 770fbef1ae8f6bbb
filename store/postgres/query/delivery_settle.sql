-- Records one attempt by the owner of its lease and lets the lease go. A
-- delivery settled since (by a sender or a disabled webhook) or leased to
-- another owner is left as it is.
UPDATE deliveries
SET state = @state,
    next_attempt_at = CASE WHEN @state = 'pending' THEN @next_attempt_at ELSE next_attempt_at END,
    delivered_at = CASE WHEN @state = 'delivered' THEN @now ELSE delivered_at END,
    last_error = CASE WHEN @error = '' THEN last_error ELSE @error END,
    lease_owner = '',
    lease_expires = 0
WHERE id = @id AND state = 'pending' AND lease_owner = @owner AND lease_owner <> '';
