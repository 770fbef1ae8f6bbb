-- The tenant's own switch first, then the global one.
SELECT engaged, reason
FROM kill_switches
WHERE engaged AND (tenant = @tenant OR tenant = '')
ORDER BY tenant DESC
LIMIT 1;
