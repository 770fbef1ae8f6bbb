-- The tenants with queued runs, each once, with how many of its runs are
-- running: a claim takes turns between them. Read by skipping from tenant
-- to tenant in runs_queued_fair, so it costs the tenants, not their runs.
WITH RECURSIVE tenants(tenant) AS (
    SELECT (SELECT min(tenant) FROM runs INDEXED BY runs_queued_fair WHERE status = 'queued')
    UNION ALL
    SELECT (SELECT min(r.tenant) FROM runs r INDEXED BY runs_queued_fair
        WHERE r.status = 'queued' AND r.tenant > tenants.tenant)
    FROM tenants
    WHERE tenants.tenant IS NOT NULL
)
SELECT tenant FROM tenants WHERE tenant IS NOT NULL;
