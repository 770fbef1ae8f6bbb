-- Tells idle workers listening on belay_wakeup that a run is due. The
-- notification goes out when the transaction commits, and not at all if it
-- rolls back.
SELECT pg_notify('belay_wakeup', json_build_object('schema', current_schema(), 'tenant', tenant, 'run', id)::text)
FROM runs
WHERE id = @id;
