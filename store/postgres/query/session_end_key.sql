UPDATE sessions
SET ended = true
WHERE key_id = @key_id AND NOT ended;
