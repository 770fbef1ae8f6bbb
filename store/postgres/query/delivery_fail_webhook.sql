-- The pending deliveries of a disabled webhook fail, leased or not: a
-- sender's late answer then finds them settled and changes nothing.
UPDATE deliveries
SET state = 'failed', last_error = 'webhook disabled', lease_owner = '', lease_expires = 0
WHERE tenant = (SELECT tenant FROM webhooks WHERE id = @webhook_id) AND webhook_id = @webhook_id
    AND state = 'pending';
