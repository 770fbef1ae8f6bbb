-- A sender holding one of these leases finds its settle ignored.
UPDATE deliveries
SET state = 'failed',
    last_error = 'webhook disabled',
    lease_owner = '',
    lease_expires = 0
WHERE webhook_id = @webhook_id AND state = 'pending';
