-- The fence of a write that precedes a call: it also renews the lease, so
-- the call starts with the whole of it. An empty owner holds nothing.
UPDATE runs
SET lease_expires = @expires
WHERE id = @id AND lease_owner = @owner AND lease_owner <> '' AND lease_epoch = @epoch AND status = 'running';
