package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	_ "embed"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/journal_append.sql
	journalAppendSQL string
	//go:embed query/journal_messages.sql
	journalMessagesSQL string
	//go:embed query/journal_events.sql
	journalEventsSQL string
	//go:embed query/run_trace_grow.sql
	runTraceGrowSQL string
	//go:embed query/journal_after.sql
	journalAfterSQL string
)

// Messages returns a run's messages in order.
func (s *Store) Messages(ctx context.Context, runID string) ([]store.Message, error) {
	rows, err := readAll(ctx, s.read, sqlrow.Journal, journalMessagesSQL, sql.Named("run_id", runID))
	if err != nil {
		return nil, fmt.Errorf("messages of run %s: %w", runID, err)
	}
	var ms []store.Message
	for _, row := range rows {
		part, err := sqlrow.JournalMessages(row)
		if err != nil {
			return nil, fmt.Errorf("messages of run %s: %w", runID, err)
		}
		ms = append(ms, part...)
	}
	return ms, nil
}

// Events returns a run's trace events in order.
func (s *Store) Events(ctx context.Context, runID string) ([]store.Event, error) {
	rows, err := readAll(ctx, s.read, sqlrow.Journal, journalEventsSQL, sql.Named("run_id", runID), sql.Named("after", 0))
	if err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	return sqlrow.JournalEventsOf(rows, func(string) int64 { return 0 }, -1)
}

// EventsAfter returns up to p.Limit events of the runs p.Runs names, each
// run's after its cursor, in one statement: the cursors go to SQLite as one
// JSON array. The store's one writer commits each run's events in order.
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
	rows, err := readAll(ctx, s.read, sqlrow.Journal, journalAfterSQL, sql.Named("runs", string(runs)), sql.Named("limit", p.Limit))
	if err != nil {
		return nil, fmt.Errorf("events of %d runs after their cursors: %w", len(p.Runs), err)
	}
	return sqlrow.JournalEventsOf(rows, sqlrow.Cursors(p.Runs), p.Limit)
}

// appendJournal writes j as a row of the journal of run runID, whose event
// count, raised by the write before it in the transaction, counts j's
// events.
func appendJournal(ctx context.Context, tx *writeTx, runID string, j sqlrow.JournalEntry) error {
	if j.Empty() {
		return nil
	}
	if _, err := tx.ExecContext(ctx, journalAppendSQL,
		sql.Named("id", runID),
		sql.Named("step", j.Step),
		sql.Named("at", j.At),
		sql.Named("first_message", j.MessageColumn()),
		sql.Named("messages", j.Messages),
		sql.Named("events", j.Events),
		sql.Named("body", j.Body),
	); err != nil {
		return fmt.Errorf("append to the journal: %w", err)
	}
	return nil
}

// appendEvents appends events to a run's trace outside a checkpoint. The
// run's event count is raised in the same transaction, so that the events
// are numbered after every event the run has.
func appendEvents(ctx context.Context, tx *writeTx, runID string, j sqlrow.JournalEntry) error {
	if j.Empty() {
		return nil
	}
	res, err := tx.ExecContext(ctx, runTraceGrowSQL, sql.Named("id", runID), sql.Named("events", j.Events))
	if err != nil {
		return fmt.Errorf("append events to run %s: %w", runID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("append events to run %s: %w", runID, err)
	} else if n == 0 {
		return fmt.Errorf("append events to run %s: %w", runID, store.ErrNotFound)
	}
	return appendJournal(ctx, tx, runID, j)
}

// eventsEntry is the journal entry of events written outside a checkpoint.
func eventsEntry(now time.Time, es []store.Event) sqlrow.JournalEntry {
	return sqlrow.NewJournalEntry(now, nil, es)
}

func eventBytes(es []store.Event) int64 {
	var n int64
	for _, e := range es {
		n += int64(len(e.Data))
	}
	return n
}
