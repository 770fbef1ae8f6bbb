-- A bucket not stored yet is full; it is created so that takers can lock it.
INSERT INTO rate_buckets (name, tokens, updated_at, blocked_until)
VALUES (@name, @burst, @now, 0)
ON CONFLICT (name) DO NOTHING;
