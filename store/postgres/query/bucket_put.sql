UPDATE rate_buckets
SET tokens = @tokens, updated_at = @updated_at, blocked_until = @blocked_until
WHERE name = @name;
