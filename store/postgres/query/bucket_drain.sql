-- An empty bucket that starts to refill when the drain ends: no take
-- before @until, and none at once after it.
INSERT INTO rate_buckets (name, tokens, updated_at, blocked_until)
VALUES (@name, 0, @until, @until)
ON CONFLICT (name) DO UPDATE
SET tokens = LEAST(rate_buckets.tokens, 0), updated_at = GREATEST(rate_buckets.updated_at, @until), blocked_until = GREATEST(rate_buckets.blocked_until, @until);
