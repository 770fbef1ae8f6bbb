-- The interior pages of one b-tree (a table or an index): the pages a
-- lookup passes through on its way to the rows.
SELECT pageno, pgoffset, pgsize
FROM dbstat
WHERE name = :name AND pagetype = 'internal'
ORDER BY pageno
