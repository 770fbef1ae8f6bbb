-- Settling a key that was never begun raises BL002: its intent would be
-- missing from the ledger.
WITH settled AS (
    UPDATE effects
    SET state = @state, result = @result, updated_at = @now
    WHERE tenant = @tenant AND key = @key
    RETURNING 1
)
SELECT raise_if(count(*) = 0, 'BL002', 'settle effect ' || @key::text || ': never begun')
FROM settled;
