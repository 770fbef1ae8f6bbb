DELETE FROM sessions WHERE key_id = @key_id;
