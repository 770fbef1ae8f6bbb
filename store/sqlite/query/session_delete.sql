DELETE FROM sessions WHERE token_hash = @token_hash;
