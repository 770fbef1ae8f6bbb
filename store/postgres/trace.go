package postgres

import (
	"context"
	"fmt"

	_ "embed"

	"github.com/jackc/pgx/v5"

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
	rows, err := s.pool.Query(ctx, messageListSQL, namedArgs{"run_id": runID})
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
	rows, err := s.pool.Query(ctx, eventListSQL, namedArgs{"run_id": runID})
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
		seq[i], step[i], role[i], created[i] = m.Seq, m.Step, m.Role, nanos(m.CreatedAt)
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
		step[i], typ[i], ts[i], data[i] = e.Step, e.Type, nanos(e.Time), e.Data
	}
	b.Queue(eventInsertSQL, namedArgs{
		"run_id": runID,
		"step":   step,
		"type":   typ,
		"ts":     ts,
		"data":   data,
	})
}
