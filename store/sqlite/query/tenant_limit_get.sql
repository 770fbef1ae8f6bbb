-- A tenant's cap on its running runs; 0 when it has none.
SELECT coalesce((SELECT max_running FROM tenant_limits WHERE tenant = @tenant), 0);
