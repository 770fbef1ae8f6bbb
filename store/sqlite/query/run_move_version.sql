-- A worker of a version that continues the run's moves the run to it as it
-- takes it, under its lease; the events it appends are counted here so
-- that journal_append.sql numbers them.
UPDATE runs
SET agent_version = @to,
    event_count = event_count + @events,
    updated_at = @now
WHERE id = @id AND lease_owner = @owner AND lease_owner <> '' AND lease_epoch = @epoch
    AND status = 'running' AND agent_version = @from;
