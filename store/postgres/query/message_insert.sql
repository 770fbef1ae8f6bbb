-- Appends messages to a run in one statement. A sequence number the run
-- already has violates messages_pkey: history is never rewritten.
INSERT INTO messages (tenant, run_id, seq, step, role, content, created_at)
SELECT (SELECT tenant FROM runs WHERE id = @run_id::text), @run_id::text,
    m.seq, m.step, m.role, m.content, m.created_at
FROM unnest(@seq::integer[], @step::integer[], @role::text[], @content::bytea[], @created_at::bigint[])
    AS m (seq, step, role, content, created_at);
