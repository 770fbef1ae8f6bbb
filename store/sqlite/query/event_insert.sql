INSERT INTO events (run_id, step, type, ts, data)
VALUES (@run_id, @step, @type, @ts, @data);
