-- Holds the run's row until the transaction ends, so that no claim or take
-- over slips between this check and the writes it fences. Raises BL001 if
-- the fence does not match.
-- An empty owner holds nothing: nobody writes under a released lease.
WITH fenced AS (
    SELECT 1
    FROM runs
    WHERE id = @id AND lease_owner = @owner AND lease_owner <> '' AND lease_epoch = @epoch
        AND status NOT IN ('done', 'failed', 'escalated', 'canceled')
    FOR SHARE
)
SELECT raise_if(count(*) = 0, 'BL001', 'lease lost') FROM fenced;
