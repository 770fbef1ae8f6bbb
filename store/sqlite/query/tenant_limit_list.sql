SELECT tenant, max_running, starts_per_minute FROM tenant_limits ORDER BY tenant;
