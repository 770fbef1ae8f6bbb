SELECT status, count(*) FROM runs GROUP BY status;
