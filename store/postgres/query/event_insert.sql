-- Appends events to a run's trace in one statement, in the order given, so
-- that their ids, which order the trace, grow in that order.
INSERT INTO events (tenant, run_id, step, type, ts, data)
SELECT (SELECT tenant FROM runs WHERE id = @run_id::text), @run_id::text, e.step, e.type, e.ts, e.data
FROM unnest(@step::integer[], @type::text[], @ts::bigint[], @data::bytea[])
    WITH ORDINALITY AS e (step, type, ts, data, ord)
ORDER BY e.ord;
