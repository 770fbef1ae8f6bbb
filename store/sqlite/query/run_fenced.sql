-- An empty owner holds nothing: nobody writes under a released lease.
SELECT count(*)
FROM runs
WHERE id = @id AND lease_owner = @owner AND lease_owner <> '' AND lease_epoch = @epoch
    AND status NOT IN ('done', 'failed', 'escalated', 'canceled');
