-- The fence of a write that precedes a call: it also renews the lease, so
-- the call starts with the whole of it, and holds the run's row until the
-- transaction ends, so no claim slips between the check and the writes it
-- fences. Raises BL001 if the fence does not match. An empty owner holds
-- nothing.
WITH fenced AS (
    UPDATE runs
    SET lease_expires = @expires
    WHERE id = @id AND lease_owner = @owner AND lease_owner <> '' AND lease_epoch = @epoch
        AND status = 'running'
    RETURNING 1
)
SELECT raise_if(count(*) = 0, 'BL001', 'lease lost') FROM fenced;
