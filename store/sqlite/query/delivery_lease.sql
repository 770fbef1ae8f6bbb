UPDATE deliveries
SET lease_owner = @owner,
    lease_expires = @expires,
    attempts = attempts + 1
WHERE id = @id
RETURNING attempts;
