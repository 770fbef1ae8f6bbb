-- Up to @limit runs that ended before @before, the earliest created first:
-- the order of the index of ended runs, read until enough have ended long
-- enough ago.
SELECT id, ref FROM runs INDEXED BY runs_ended
WHERE status IN ('done', 'failed', 'escalated', 'canceled') AND updated_at < @before
ORDER BY created_at, id
LIMIT @limit;
