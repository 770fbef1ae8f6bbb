-- Locks the run of an approval. Every write to a run's approvals holds its
-- run's row (deciding, expiring, and the checkpoint that asks), so the
-- decisions of one run take turns and the last one sees that nothing is
-- pending any more. Approvals are read after this, by a statement that sees
-- what the previous holder committed.
SELECT 1
FROM runs r
JOIN approvals a ON a.tenant = r.tenant AND a.run_id = r.id
WHERE a.id = @id AND (@tenant = '' OR a.tenant = @tenant)
FOR NO KEY UPDATE OF r;
