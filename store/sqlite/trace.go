package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	_ "embed"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/journal_insert.sql
	journalInsertSQL string
	//go:embed query/journal_messages.sql
	journalMessagesSQL string
	//go:embed query/journal_events.sql
	journalEventsSQL string
	//go:embed query/run_trace_grow.sql
	runTraceGrowSQL string
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
	return s.EventsAfter(ctx, runID, 0)
}

// EventsAfter returns a run's trace events numbered above after, in order.
func (s *Store) EventsAfter(ctx context.Context, runID string, after int64) ([]store.Event, error) {
	rows, err := readAll(ctx, s.read, sqlrow.Journal, journalEventsSQL, sql.Named("run_id", runID), sql.Named("after", after))
	if err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	var es []store.Event
	for _, row := range rows {
		part, err := sqlrow.JournalEvents(row, after)
		if err != nil {
			return nil, fmt.Errorf("events of run %s: %w", runID, err)
		}
		es = append(es, part...)
	}
	return es, nil
}

// insertJournal writes j as a row of the journal of the run ref, whose
// event count, with j's events counted, is eventCount.
func insertJournal(ctx context.Context, tx *writeTx, ref, eventCount int64, j sqlrow.JournalEntry) error {
	if j.Empty() {
		return nil
	}
	_, err := tx.ExecContext(ctx, journalInsertSQL,
		sql.Named("ref", ref),
		sql.Named("step", j.Step),
		sql.Named("at", j.At),
		sql.Named("first_message", j.MessageColumn()),
		sql.Named("messages", j.Messages),
		sql.Named("first_event", eventCount-int64(j.Events)+1),
		sql.Named("events", j.Events),
		sql.Named("body", j.Body),
	)
	if err != nil {
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
	var ref, count int64
	err := tx.QueryRowContext(ctx, runTraceGrowSQL, sql.Named("id", runID), sql.Named("events", j.Events)).Scan(&ref, &count)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("append events to run %s: %w", runID, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("append events to run %s: %w", runID, err)
	}
	return insertJournal(ctx, tx, ref, count, j)
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
