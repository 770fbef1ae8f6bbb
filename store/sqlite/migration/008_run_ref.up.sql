-- Messages and events refer to their run by a small integer, not by its
-- 29-character id. Their keys and the events' run index shrink to a third,
-- so the pages a group commit dirties for the steps of many runs fall from
-- about 47 to 34, and the file by a fifth.
--
-- ref is not the rowid: VACUUM may renumber the rowids of a table whose
-- primary key is not an INTEGER PRIMARY KEY. max(ref) + 1 reuses a ref only
-- once PruneRuns has deleted its run with every row that named it.
ALTER TABLE runs ADD COLUMN ref INTEGER;
UPDATE runs SET ref = rowid;
CREATE UNIQUE INDEX runs_ref ON runs (ref);

-- Belay sets ref when it creates a run. An older belay still running on the
-- file while a newer one migrates it does not; its runs get one here, so
-- that the newer belay can carry them on. (The older one can write no more
-- steps: its messages and events name a column that is gone. Its lease runs
-- out and a newer worker takes the run.)
CREATE TRIGGER runs_ref_for_older_belay AFTER INSERT ON runs WHEN NEW.ref IS NULL
BEGIN
    UPDATE runs SET ref = (SELECT max(ref) FROM runs) + 1 WHERE rowid = NEW.rowid;
END;

CREATE TABLE messages_by_ref (
    run_ref    INTEGER NOT NULL REFERENCES runs (ref),
    seq        INTEGER NOT NULL,
    step       INTEGER NOT NULL,
    role       TEXT    NOT NULL,
    content    BLOB    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (run_ref, seq)
) STRICT, WITHOUT ROWID;

INSERT INTO messages_by_ref (run_ref, seq, step, role, content, created_at)
SELECT r.ref, m.seq, m.step, m.role, m.content, m.created_at
FROM messages m JOIN runs r ON r.id = m.run_id;

DROP TABLE messages;
ALTER TABLE messages_by_ref RENAME TO messages;

CREATE TABLE events_by_ref (
    -- Not AUTOINCREMENT: rowids already grow while no event is deleted, and
    -- AUTOINCREMENT costs a write to sqlite_sequence per event.
    id      INTEGER NOT NULL PRIMARY KEY,
    run_ref INTEGER NOT NULL REFERENCES runs (ref),
    step    INTEGER NOT NULL,
    type    TEXT    NOT NULL,
    ts      INTEGER NOT NULL,
    data    BLOB
) STRICT;

INSERT INTO events_by_ref (id, run_ref, step, type, ts, data)
SELECT e.id, r.ref, e.step, e.type, e.ts, e.data
FROM events e JOIN runs r ON r.id = e.run_id;

DROP TABLE events;
ALTER TABLE events_by_ref RENAME TO events;
CREATE INDEX events_run ON events (run_ref, id);

PRAGMA user_version = 8;
