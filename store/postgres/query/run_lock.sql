SELECT status, stop_reason
FROM runs
WHERE id = @id AND (@tenant = '' OR tenant = @tenant)
FOR UPDATE;
