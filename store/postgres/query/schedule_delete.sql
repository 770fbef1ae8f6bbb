DELETE FROM schedules WHERE tenant = @tenant::text AND name = @name::text;
