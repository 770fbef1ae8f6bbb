SELECT tenant, max_running FROM tenant_limits ORDER BY tenant;
