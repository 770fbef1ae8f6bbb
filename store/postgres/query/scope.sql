-- The rest of the transaction acts for one tenant, as the application role:
-- row-level security confines it to the rows of belay.tenant.
SELECT set_config('role', @role, true), set_config('belay.tenant', @tenant, true);
