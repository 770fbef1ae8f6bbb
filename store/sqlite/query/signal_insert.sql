INSERT INTO signals (id, tenant, run_id, name, key, payload, created_at, consumed_by)
VALUES (@id, @tenant, @run_id, @name, @key, @payload, @now, @consumed_by);
