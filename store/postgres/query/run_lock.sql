SELECT status
FROM runs
WHERE id = @id AND (@tenant = '' OR tenant = @tenant)
FOR UPDATE;
