package postgres

import (
	"context"
	"fmt"

	_ "embed"

	"github.com/jackc/pgx/v5"

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
	ms, err := queryAll(ctx, s.pool, sqlrow.Message, messageListSQL, namedArgs{"run_id": runID})
	if err != nil {
		return nil, fmt.Errorf("messages of run %s: %w", runID, err)
	}
	return ms, nil
}

// Events returns a run's trace events in order.
func (s *Store) Events(ctx context.Context, runID string) ([]store.Event, error) {
	es, err := queryAll(ctx, s.pool, sqlrow.Event, eventListSQL, namedArgs{"run_id": runID})
	if err != nil {
		return nil, fmt.Errorf("events of run %s: %w", runID, err)
	}
	return es, nil
}

// EventsAfter returns up to p.Limit events of the runs p.Runs names, each
// run's after its cursor, in Seq order, in one statement. The ids come from
// one sequence shared by every writer, but every write that appends to a
// run's trace first locks the run's row (a fence, a decision's or a
// cancel's lock), so one run's events commit in the order of their ids.
func (s *Store) EventsAfter(ctx context.Context, p store.EventsAfterParams) ([]store.Event, error) {
	if len(p.Runs) == 0 || p.Limit <= 0 {
		return nil, nil
	}
	ids := make([]string, len(p.Runs))
	afters := make([]int64, len(p.Runs))
	for i, c := range p.Runs {
		ids[i], afters[i] = c.RunID, c.After
	}
	es, err := queryAll(ctx, s.pool, sqlrow.Event, eventListAfterSQL,
		namedArgs{"run_ids": ids, "afters": afters, "limit": p.Limit})
	if err != nil {
		return nil, fmt.Errorf("events of %d runs after their cursors: %w", len(p.Runs), err)
	}
	return es, nil
}

// queueMessages appends messages to a run in one statement. A sequence
// number the run already has fails: history is never rewritten.
func queueMessages(b *pgx.Batch, runID string, ms []store.Message) {
	if len(ms) == 0 {
		return
	}
	var (
		seq     = make([]int, len(ms))
		step    = make([]int, len(ms))
		role    = make([]string, len(ms))
		content = make([][]byte, len(ms))
		created = make([]int64, len(ms))
	)
	for i, m := range ms {
		seq[i], step[i], role[i], created[i] = m.Seq, m.Step, m.Role, sqlrow.Nanos(m.CreatedAt)
		content[i] = m.Content
		if content[i] == nil {
			content[i] = []byte{}
		}
	}
	b.Queue(messageInsertSQL, namedArgs{
		"run_id":     runID,
		"seq":        seq,
		"step":       step,
		"role":       role,
		"content":    content,
		"created_at": created,
	})
}

// queueEvents appends events to a run's trace in one statement; the table
// assigns their Seq, in the order given.
func queueEvents(b *pgx.Batch, runID string, es []store.Event) {
	if len(es) == 0 {
		return
	}
	var (
		step = make([]int, len(es))
		typ  = make([]string, len(es))
		ts   = make([]int64, len(es))
		data = make([][]byte, len(es))
	)
	for i, e := range es {
		step[i], typ[i], ts[i], data[i] = e.Step, e.Type, sqlrow.Nanos(e.Time), e.Data
	}
	b.Queue(eventInsertSQL, namedArgs{
		"run_id": runID,
		"step":   step,
		"type":   typ,
		"ts":     ts,
		"data":   data,
	})
}
