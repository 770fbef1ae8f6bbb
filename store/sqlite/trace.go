package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	_ "embed"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/message_insert.sql
	messageInsertSQL string
	//go:embed query/message_list.sql
	messageListSQL string
	//go:embed query/event_insert.sql
	eventInsertSQL string
	//go:embed query/event_list.sql
	eventListSQL string
	//go:embed query/event_list_after.sql
	eventListAfterSQL string
)

// Messages returns a run's messages in order.
func (s *Store) Messages(ctx context.Context, runID string) ([]store.Message, error) {
	ms, err := readAll(ctx, s.read, sqlrow.Message, messageListSQL, sql.Named("run_id", runID))
	if err != nil {
		return nil, fmt.Errorf("messages of run %s: %w", runID, err)
	}
	return ms, nil
}

// Events returns a run's trace events in order.
func (s *Store) Events(ctx context.Context, runID string) ([]store.Event, error) {
	es, err := readAll(ctx, s.read, sqlrow.Event, eventListSQL, sql.Named("run_id", runID))
	if err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	return es, nil
}

// EventsAfter returns up to p.Limit events of the runs p.Runs names, each
// run's after its cursor, in Seq order, in one statement: the cursors go
// to SQLite as one JSON array. The store's one writer commits in Seq order,
// so a reader never finds a gap filled later.
func (s *Store) EventsAfter(ctx context.Context, p store.EventsAfterParams) ([]store.Event, error) {
	if len(p.Runs) == 0 || p.Limit <= 0 {
		return nil, nil
	}
	type cursor struct {
		Run   string `json:"run"`
		After int64  `json:"after"`
	}
	cs := make([]cursor, len(p.Runs))
	for i, c := range p.Runs {
		cs[i] = cursor{Run: c.RunID, After: c.After}
	}
	runs, err := json.Marshal(cs)
	if err != nil {
		return nil, fmt.Errorf("events after: %w", err)
	}
	es, err := readAll(ctx, s.read, sqlrow.Event, eventListAfterSQL, sql.Named("runs", string(runs)), sql.Named("limit", p.Limit))
	if err != nil {
		return nil, fmt.Errorf("events of %d runs after their cursors: %w", len(p.Runs), err)
	}
	return es, nil
}

// insertMessages appends messages to a run, up to rowsPerInsert in one
// statement. A sequence number the run already has fails: history is never
// rewritten.
func insertMessages(ctx context.Context, tx *writeTx, runID string, ms []store.Message) error {
	for chunk := range slices.Chunk(ms, rowsPerInsert) {
		args := make([]any, 0, 6*len(chunk))
		for _, m := range chunk {
			content := m.Content
			if content == nil {
				content = []byte{}
			}
			args = append(args, runID, m.Seq, m.Step, m.Role, content, sqlrow.Nanos(m.CreatedAt))
		}
		_, err := tx.ExecContext(ctx, messageInserts[len(chunk)-1], args...)
		first, last := chunk[0].Seq, chunk[len(chunk)-1].Seq
		if isPrimaryKeyConflict(err) {
			return fmt.Errorf("append messages %d to %d: %w: %w", first, last, store.ErrMessageExists, err)
		}
		if err != nil {
			return fmt.Errorf("append messages %d to %d: %w", first, last, err)
		}
	}
	return nil
}

// insertEvents appends events to a run's trace, up to rowsPerInsert in one
// statement; the table assigns their Seq in order.
func insertEvents(ctx context.Context, tx *writeTx, runID string, es []store.Event) error {
	for chunk := range slices.Chunk(es, rowsPerInsert) {
		args := make([]any, 0, 5*len(chunk))
		for _, e := range chunk {
			args = append(args, runID, e.Step, e.Type, sqlrow.Nanos(e.Time), []byte(e.Data))
		}
		if _, err := tx.ExecContext(ctx, eventInserts[len(chunk)-1], args...); err != nil {
			return fmt.Errorf("append events %s to %s: %w", chunk[0].Type, chunk[len(chunk)-1].Type, err)
		}
	}
	return nil
}

func isPrimaryKeyConflict(err error) bool {
	var e *sqlitedriver.Error
	return errors.As(err, &e) && e.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
}

func eventBytes(es []store.Event) int64 {
	var n int64
	for _, e := range es {
		n += int64(len(e.Data))
	}
	return n
}
