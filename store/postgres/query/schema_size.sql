-- The bytes of every table of Belay's schema, with its indexes and TOAST.
SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = @schema AND c.relkind = 'r';
