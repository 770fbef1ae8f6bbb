package sqlrow

import "github.com/belayrun/belay/store"

type eventRaw struct {
	ts int64
}

func eventColumns(e *store.Event, x *eventRaw, c *columns) {
	c.add("id", &e.Seq)
	c.add("run_id", &e.RunID)
	c.add("step", &e.Step)
	c.add("type", &e.Type)
	c.add("ts", &x.ts)
	c.add("data", (*[]byte)(&e.Data))
}

func decodeEvent(e *store.Event, x *eventRaw) error {
	e.Time = Time(x.ts)
	return nil
}

// Event reads the columns of a "-- columns: event" query.
func Event(row Scanner) (store.Event, error) {
	return scanRow(row, new(eventRaw), eventColumns, decodeEvent)
}

type messageRaw struct {
	created int64
}

func messageColumns(m *store.Message, x *messageRaw, c *columns) {
	c.add("run_id", &m.RunID)
	c.add("seq", &m.Seq)
	c.add("step", &m.Step)
	c.add("role", &m.Role)
	c.add("content", &m.Content)
	c.add("created_at", &x.created)
}

func decodeMessage(m *store.Message, x *messageRaw) error {
	m.CreatedAt = Time(x.created)
	return nil
}

// Message reads the columns of a "-- columns: message" query.
func Message(row Scanner) (store.Message, error) {
	return scanRow(row, new(messageRaw), messageColumns, decodeMessage)
}
