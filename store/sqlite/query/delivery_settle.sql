-- Only the owner of the lease settles, once: the lease is released either
-- way, and an empty owner holds nothing.
UPDATE deliveries
SET state = @state,
    next_attempt_at = CASE WHEN @state = 'pending' THEN @next_attempt_at ELSE next_attempt_at END,
    delivered_at = CASE WHEN @state = 'delivered' THEN @now ELSE delivered_at END,
    last_error = CASE WHEN @error <> '' THEN @error ELSE last_error END,
    lease_owner = '',
    lease_expires = 0
WHERE id = @id AND state = 'pending' AND lease_owner = @owner AND lease_owner <> '';
