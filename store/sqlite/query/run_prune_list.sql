-- Up to @limit runs that ended before @before, the earliest first. A run an
-- older belay ended has no ended_at; updated_at, which every belay writes,
-- keeps it until it is old enough too.
SELECT id, ref FROM runs INDEXED BY runs_ended
WHERE status IN ('done', 'failed', 'escalated', 'canceled')
    AND ended_at < @before AND updated_at < @before
ORDER BY ended_at, id
LIMIT @limit;
