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
	//go:embed query/journal_after.sql
	journalAfterSQL string
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
	rows, err := queryAll(ctx, s.pool, sqlrow.Journal, journalEventsSQL, namedArgs{"run_id": runID, "after": 0})
	if err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	return sqlrow.JournalEventsOf(rows, func(string) int64 { return 0 }, -1)
}

// EventsAfter returns up to p.Limit events of the runs p.Runs names, each
// run's after its cursor, in one statement. Every write that appends to a
// run's trace numbers its events under the run's row lock, so one run's
// events commit in the order of their numbers.
func (s *Store) EventsAfter(ctx context.Context, p store.EventsAfterParams) ([]store.Event, error) {
	if len(p.Runs) == 0 || p.Limit <= 0 {
		return nil, nil
	}
	ids := make([]string, len(p.Runs))
	afters := make([]int64, len(p.Runs))
	for i, c := range p.Runs {
		ids[i], afters[i] = c.RunID, c.After
	}
	rows, err := queryAll(ctx, s.pool, sqlrow.Journal, journalAfterSQL,
		namedArgs{"run_ids": ids, "afters": afters, "limit": p.Limit})
	if err != nil {
		return nil, fmt.Errorf("events of %d runs after their cursors: %w", len(p.Runs), err)
	}
	return sqlrow.JournalEventsOf(rows, sqlrow.Cursors(p.Runs), p.Limit)
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
