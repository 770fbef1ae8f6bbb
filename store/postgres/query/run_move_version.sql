-- A worker of a version that continues the run's moves the run to it as it
-- takes it, under its lease. No row: the lease or the version is not the
-- worker's any more.
UPDATE runs
SET agent_version = @to::text,
    updated_at = @now::bigint,
    changed_at = @now::bigint
WHERE id = @id::text AND lease_owner = @owner::text AND lease_owner <> '' AND lease_epoch = @epoch::bigint
    AND status = 'running' AND agent_version = @from::text
RETURNING id;
