INSERT INTO rate_buckets (name, tokens, updated_at, blocked_until)
VALUES (@name, @tokens, @updated_at, @blocked_until)
ON CONFLICT (name) DO UPDATE
SET tokens = excluded.tokens, updated_at = excluded.updated_at, blocked_until = excluded.blocked_until;
