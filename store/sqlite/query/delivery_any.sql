-- Whether ClaimDeliveries has anything to do: an undispatched outbox
-- message, or a pending delivery that is due. Both are index lookups.
SELECT EXISTS (SELECT 1 FROM outbox WHERE delivered_at = 0)
    OR EXISTS (SELECT 1 FROM deliveries WHERE state = 'pending' AND next_attempt_at <= @now AND lease_expires <= @now);
