UPDATE sessions
SET ended = true
WHERE token_hash = @token_hash;
