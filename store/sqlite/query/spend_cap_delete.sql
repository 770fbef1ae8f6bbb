DELETE FROM spend_caps WHERE tenant = @tenant;
