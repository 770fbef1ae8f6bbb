package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	_ "embed"

	sqlitedriver "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/belayrun/belay/store"
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
)

// Messages returns a run's messages in order.
func (s *Store) Messages(ctx context.Context, runID string) ([]store.Message, error) {
	rows, err := s.read.QueryContext(ctx, messageListSQL, sql.Named("run_id", runID))
	if err != nil {
		return nil, fmt.Errorf("messages of run %s: %w", runID, err)
	}
	defer rows.Close()
	var ms []store.Message
	for rows.Next() {
		var (
			m       store.Message
			created int64
		)
		if err := rows.Scan(&m.RunID, &m.Seq, &m.Step, &m.Role, &m.Content, &created); err != nil {
			return nil, fmt.Errorf("messages of run %s: %w", runID, err)
		}
		m.CreatedAt = fromNanos(created)
		ms = append(ms, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("messages of run %s: %w", runID, err)
	}
	return ms, nil
}

// Events returns a run's trace events in order.
func (s *Store) Events(ctx context.Context, runID string) ([]store.Event, error) {
	rows, err := s.read.QueryContext(ctx, eventListSQL, sql.Named("run_id", runID))
	if err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	defer rows.Close()
	var es []store.Event
	for rows.Next() {
		var (
			e  store.Event
			ts int64
		)
		if err := rows.Scan(&e.Seq, &e.RunID, &e.Step, &e.Type, &ts, (*[]byte)(&e.Data)); err != nil {
			return nil, fmt.Errorf("events of run %s: %w", runID, err)
		}
		e.Time = fromNanos(ts)
		es = append(es, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	return es, nil
}

// insertMessages appends messages to a run. A sequence number the run
// already has fails: history is never rewritten.
func insertMessages(ctx context.Context, tx *writeTx, runID string, ms []store.Message) error {
	for _, m := range ms {
		content := m.Content
		if content == nil {
			content = []byte{}
		}
		_, err := tx.ExecContext(ctx, messageInsertSQL,
			sql.Named("run_id", runID),
			sql.Named("seq", m.Seq),
			sql.Named("step", m.Step),
			sql.Named("role", m.Role),
			sql.Named("content", content),
			sql.Named("created_at", nanos(m.CreatedAt)),
		)
		if isPrimaryKeyConflict(err) {
			return fmt.Errorf("append message %d: exists, messages are append-only: %w", m.Seq, err)
		}
		if err != nil {
			return fmt.Errorf("append message %d: %w", m.Seq, err)
		}
	}
	return nil
}

// insertEvents appends events to a run's trace; the table assigns their Seq.
func insertEvents(ctx context.Context, tx *writeTx, runID string, es []store.Event) error {
	for _, e := range es {
		_, err := tx.ExecContext(ctx, eventInsertSQL,
			sql.Named("run_id", runID),
			sql.Named("step", e.Step),
			sql.Named("type", e.Type),
			sql.Named("ts", nanos(e.Time)),
			sql.Named("data", []byte(e.Data)),
		)
		if err != nil {
			return fmt.Errorf("append event %s: %w", e.Type, err)
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
