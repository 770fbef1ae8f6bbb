DELETE FROM schedules WHERE tenant = @tenant AND name = @name;
