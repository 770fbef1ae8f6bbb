-- A run's messages and trace events move into its journal: one row for each
-- write that appends to them, holding what it appends in one body (see
-- store/internal/sqlrow/journal.go), so a step costs one row and one index
-- entry instead of a row and an index entry per message and per event.
-- Its columns place the row's items in the run: the sequence number of its
-- first message and of its first event, and how many of each it holds.
--
-- Events are numbered per run, from 1, in the order they were written:
-- event_count is how many a run has, raised under the run's row lock by
-- each write that appends some, so the events of a run are numbered in the
-- order their transactions commit, whatever the order of the identity.
ALTER TABLE runs ADD COLUMN event_count bigint NOT NULL DEFAULT 0;

CREATE TABLE journal (
    id            bigint  NOT NULL GENERATED ALWAYS AS IDENTITY,
    tenant        text    NOT NULL,
    run_id        text    NOT NULL,
    step          integer NOT NULL,
    at            bigint  NOT NULL,
    first_message integer NOT NULL,
    messages      integer NOT NULL,
    first_event   bigint  NOT NULL,
    events        integer NOT NULL,
    body          bytea   NOT NULL,
    -- Where the run's events stand after this row: it grows with the rows
    -- of a run as their ids do, so the key finds the rows of a run in the
    -- order they were written, and a reader of the events after a given
    -- one starts at the row that holds it.
    next_event    bigint  GENERATED ALWAYS AS (first_event + events) STORED,
    PRIMARY KEY (tenant, run_id, next_event, id)
);

ALTER TABLE journal ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON journal
    USING (tenant = nullif(current_setting('belay.tenant', true), ''));

-- The rows of the tables they replace move one item a row, their content
-- and data in hex, which the reader decodes to the same bytes (PostgreSQL
-- 15 cannot test whether bytes are JSON without failing on those that are
-- not).
INSERT INTO journal (tenant, run_id, step, at, first_message, messages, first_event, events, body)
SELECT tenant, run_id, step, created_at, seq, 1, 0, 0,
    convert_to('{"m":[{"r":' || to_json(role)::text ||
        CASE WHEN length(content) = 0 THEN '' ELSE ',"cx":"' || encode(content, 'hex') || '"' END ||
        '}],"e":[]}', 'UTF8')
FROM messages
ORDER BY tenant, run_id, seq;

INSERT INTO journal (tenant, run_id, step, at, first_message, messages, first_event, events, body)
SELECT tenant, run_id, step, ts, 0, 0,
    row_number() OVER (PARTITION BY tenant, run_id ORDER BY id), 1,
    convert_to('{"m":[],"e":[{"y":' || to_json(type)::text ||
        CASE WHEN data IS NULL OR length(data) = 0 THEN '' ELSE ',"dx":"' || encode(data, 'hex') || '"' END ||
        '}]}', 'UTF8')
FROM events
ORDER BY id;

UPDATE runs SET event_count = e.n
FROM (SELECT tenant, run_id, count(*) AS n FROM events GROUP BY tenant, run_id) e
WHERE runs.tenant = e.tenant AND runs.id = e.run_id;

DROP TABLE messages;
DROP TABLE events;
