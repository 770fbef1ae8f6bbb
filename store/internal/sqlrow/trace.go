package sqlrow

import "github.com/belayrun/belay/store"

func eventColumns(e *store.Event, ts *int64) []column {
	return []column{
		{"id", &e.Seq},
		{"run_id", &e.RunID},
		{"step", &e.Step},
		{"type", &e.Type},
		{"ts", ts},
		{"data", (*[]byte)(&e.Data)},
	}
}

// Event reads the columns of a "-- columns: event" query.
func Event(row Scanner) (store.Event, error) {
	var (
		e  store.Event
		ts int64
	)
	if err := scan(row, eventColumns(&e, &ts)); err != nil {
		return store.Event{}, err
	}
	e.Time = Time(ts)
	return e, nil
}

func messageColumns(m *store.Message, created *int64) []column {
	return []column{
		{"run_id", &m.RunID},
		{"seq", &m.Seq},
		{"step", &m.Step},
		{"role", &m.Role},
		{"content", &m.Content},
		{"created_at", created},
	}
}

// Message reads the columns of a "-- columns: message" query.
func Message(row Scanner) (store.Message, error) {
	var (
		m       store.Message
		created int64
	)
	if err := scan(row, messageColumns(&m, &created)); err != nil {
		return store.Message{}, err
	}
	m.CreatedAt = Time(created)
	return m, nil
}
