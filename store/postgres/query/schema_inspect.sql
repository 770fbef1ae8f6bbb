-- Whether the schema has Belay's version table, and how many relations it
-- holds in all: a schema with relations but no version table is another
-- application's.
SELECT count(*) FILTER (WHERE c.relname = 'belay_schema_version'), count(*)
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = @schema AND c.relkind IN ('r', 'p', 'v', 'm', 'f');
