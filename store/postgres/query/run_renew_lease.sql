-- An empty owner holds nothing: nobody writes under a released lease.
UPDATE runs
SET lease_expires = @expires
WHERE id = @id AND lease_owner = @owner AND lease_owner <> '' AND lease_epoch = @epoch
    AND status = 'running';
