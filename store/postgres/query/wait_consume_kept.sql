-- An event wait a checkpoint has just inserted is answered at once by the
-- oldest signal of its name the run kept, which it consumes. The run's row
-- is held by the checkpoint, as by every write to its waits and signals.
WITH sig AS (
    SELECT s.id, s.payload
    FROM signals s
    JOIN waits w ON w.tenant = s.tenant AND w.run_id = s.run_id AND w.name = s.name
    WHERE w.id = @id AND w.kind = 'event' AND w.status = 'pending' AND s.consumed_by = ''
    ORDER BY s.seq
    LIMIT 1
), answered AS (
    UPDATE waits
    SET status = 'answered', answer = sig.payload, answered_by = 'signal', answered_at = @now
    FROM sig
    WHERE waits.id = @id AND waits.status = 'pending'
    RETURNING waits.id AS wait_id, sig.id AS signal_id
)
UPDATE signals SET consumed_by = answered.wait_id
FROM answered
WHERE signals.id = answered.signal_id;
