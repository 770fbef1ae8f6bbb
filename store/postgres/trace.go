package postgres

import (
	"context"
	"fmt"
	"time"

	_ "embed"

	"github.com/jackc/pgx/v5"

	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/internal/sqlrow"
)

var (
	//go:embed query/journal_append.sql
	journalAppendSQL string
	//go:embed query/journal_checkpoint.sql
	journalCheckpointSQL string
	//go:embed query/journal_messages.sql
	journalMessagesSQL string
	//go:embed query/journal_events.sql
	journalEventsSQL string
)

// Messages returns a run's messages in order.
func (s *Store) Messages(ctx context.Context, runID string) ([]store.Message, error) {
	rows, err := queryAll(ctx, s.pool, sqlrow.Journal, journalMessagesSQL, namedArgs{"run_id": runID})
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
	rows, err := queryAll(ctx, s.pool, sqlrow.Journal, journalEventsSQL, namedArgs{"run_id": runID, "after": after})
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

// journalArgs are the arguments of a journal row's insert.
func journalArgs(runID string, j sqlrow.JournalEntry) namedArgs {
	return namedArgs{
		"run_id":        runID,
		"step":          j.Step,
		"at":            j.At,
		"first_message": j.MessageColumn(),
		"messages":      j.Messages,
		"events":        j.Events,
		"body":          j.Body,
	}
}

// queueEvents appends events to a run's trace outside a checkpoint, in one
// statement that numbers them after every event the run has.
func queueEvents(b *pgx.Batch, runID string, es []store.Event) {
	if len(es) == 0 {
		return
	}
	b.Queue(journalAppendSQL, journalArgs(runID, sqlrow.NewJournalEntry(time.Time{}, nil, es)))
}

// queueCheckpointJournal appends a checkpoint's journal row, after its
// fenced update has counted the row's events.
func queueCheckpointJournal(b *pgx.Batch, runID string, j sqlrow.JournalEntry) {
	if j.Empty() {
		return
	}
	b.Queue(journalCheckpointSQL, journalArgs(runID, j))
}
