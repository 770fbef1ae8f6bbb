DELETE FROM tenant_limits WHERE tenant = @tenant;
