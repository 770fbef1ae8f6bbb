UPDATE effects
SET state = @state, result = @result, updated_at = @now
WHERE tenant = @tenant AND key = @key;
