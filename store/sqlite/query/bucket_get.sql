SELECT tokens, updated_at, blocked_until FROM rate_buckets WHERE name = @name;
