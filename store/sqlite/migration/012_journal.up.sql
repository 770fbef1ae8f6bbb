-- A run's messages and trace events move into its journal: one row for each
-- write that appends to them, holding what it appends in one body (see
-- store/internal/sqlrow/journal.go), so a step costs one row instead of a
-- row per message and per event. Its columns place the row's items in the
-- run: the sequence number of its first message and of its first event, and
-- how many of each it holds.
--
-- Events are numbered per run, from 1, in the order they were written:
-- event_count is how many a run has, raised by each write that appends
-- some, so the next write numbers its own after them.
--
-- The index finds a run's rows by where its events stand after each
-- (first_event + events, which grows with the rows of a run as their ids
-- do): a reader of the events after a given one starts at the row that
-- holds it. Rows are appended by id, so the table grows at its end.
ALTER TABLE runs ADD COLUMN event_count INTEGER NOT NULL DEFAULT 0;

CREATE TABLE journal (
    id            INTEGER NOT NULL PRIMARY KEY,
    run_ref       INTEGER NOT NULL REFERENCES runs (ref),
    step          INTEGER NOT NULL,
    at            INTEGER NOT NULL,
    first_message INTEGER NOT NULL,
    messages      INTEGER NOT NULL,
    first_event   INTEGER NOT NULL,
    events        INTEGER NOT NULL,
    body          BLOB    NOT NULL
) STRICT;
CREATE INDEX journal_run ON journal (run_ref, first_event + events);

-- The rows of the tables they replace move one item a row. Content and
-- data that SQLite's json() gives back byte for byte are kept as JSON; the
-- rest (white space a model sent, bytes that are not JSON) in hex, which
-- the reader decodes to the same bytes.
INSERT INTO journal (run_ref, step, at, first_message, messages, first_event, events, body)
SELECT run_ref, step, created_at, seq, 1, 0, 0,
    CAST('{"m":[{"r":' || json_quote(role) ||
        CASE
            WHEN length(content) = 0 THEN ''
            WHEN json_valid(CAST(content AS TEXT)) AND json(CAST(content AS TEXT)) == CAST(content AS TEXT)
                THEN ',"c":' || CAST(content AS TEXT)
            ELSE ',"cx":"' || hex(content) || '"'
        END || '}],"e":[]}' AS BLOB)
FROM messages
ORDER BY run_ref, seq;

INSERT INTO journal (run_ref, step, at, first_message, messages, first_event, events, body)
SELECT run_ref, step, ts, 0, 0,
    row_number() OVER (PARTITION BY run_ref ORDER BY id), 1,
    CAST('{"m":[],"e":[{"y":' || json_quote(type) ||
        CASE
            WHEN data IS NULL OR length(data) = 0 THEN ''
            WHEN json_valid(CAST(data AS TEXT)) AND json(CAST(data AS TEXT)) == CAST(data AS TEXT)
                THEN ',"d":' || CAST(data AS TEXT)
            ELSE ',"dx":"' || hex(data) || '"'
        END || '}]}' AS BLOB)
FROM events
ORDER BY id;

UPDATE runs SET event_count = (SELECT count(*) FROM events e WHERE e.run_ref = runs.ref);

DROP TABLE messages;
DROP TABLE events;

PRAGMA user_version = 12;
