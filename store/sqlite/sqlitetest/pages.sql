-- The pages of one b-tree (a table or an index) of one type: 'internal'
-- (the pages a lookup passes through on its way to the rows) or 'leaf'.
SELECT pageno, pgoffset, pgsize
FROM dbstat
WHERE name = :name AND pagetype = :pagetype
ORDER BY pageno
