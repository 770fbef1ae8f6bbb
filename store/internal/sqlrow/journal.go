package sqlrow

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/belayrun/belay/store"
)

// # The journal
//
// A run's messages and trace events are rows of its journal: one row for
// each write that appended to them, so that a step of a run costs the store
// one row however many messages and events it adds. The row's columns say
// where its items fall in the run (the sequence number of its first message
// and of its first event, and how many of each it holds); its body holds
// the items themselves, encoded once by the writer's caller:
//
//	{"m":[{"r":"user","c":[...]}, ...], "e":[{"y":"model_call","d":{...}}, ...]}
//
// A message has its role (r) and content (c); an event its type (y) and data
// (d); an event without data has none (nil). An item whose step differs from the row's names it (s), and one whose
// time differs from the row's gives the difference in nanoseconds (t).
// Content and data are JSON and stored as they are, byte for byte; bytes
// that are not JSON, or that JSON would not give back exactly (white space
// around the value), are stored in base64 (cb, db). Rows moved from the
// tables of an older schema may hold them in hex (cx, dx).

// JournalRow is one row of a run's journal as a query reads it: a
// "-- columns: journal" query.
type JournalRow struct {
	RunID        string
	Step         int
	At           int64
	FirstMessage int
	Messages     int
	FirstEvent   int64
	Events       int
	Body         []byte
}

func journalColumns(j *JournalRow, _ *struct{}, c *columns) {
	c.add("run_id", &j.RunID)
	c.add("step", &j.Step)
	c.add("at", &j.At)
	c.add("first_message", &j.FirstMessage)
	c.add("messages", &j.Messages)
	c.add("first_event", &j.FirstEvent)
	c.add("events", &j.Events)
	c.add("body", &j.Body)
}

// Journal reads the columns of a "-- columns: journal" query.
func Journal(row Scanner) (JournalRow, error) {
	return scanRow(row, new(struct{}), journalColumns, func(*JournalRow, *struct{}) error { return nil })
}

// journalItem is a message or an event in a row's body.
type journalItem struct {
	Role    string          `json:"r,omitempty"`
	Type    string          `json:"y,omitempty"`
	Content json.RawMessage `json:"c,omitempty"`
	Data    json.RawMessage `json:"d,omitempty"`
	// Base64 and Hex hold content or data that is not stored as JSON.
	ContentB64 string `json:"cb,omitempty"`
	DataB64    string `json:"db,omitempty"`
	ContentHex string `json:"cx,omitempty"`
	DataHex    string `json:"dx,omitempty"`
	Step       *int   `json:"s,omitempty"`
	Delta      int64  `json:"t,omitempty"`
}

type journalBody struct {
	Messages []journalItem `json:"m"`
	Events   []journalItem `json:"e"`
}

// JournalEntry is a row of a run's journal before it is written: what one
// write appends to the run, its body encoded by the writer's caller, so that
// the goroutine that writes for many runs binds bytes and encodes nothing.
type JournalEntry struct {
	Step int
	At   int64
	// FirstMessage is the sequence number of the first message, or -1 if
	// the entry holds none.
	FirstMessage int
	Messages     int
	Events       int
	Body         []byte
}

// NewJournalEntry encodes what one write appends to a run: its messages, then
// its events. The row takes the step and the time of its first item, so
// that its items differ from it the least; with no item, those of now.
func NewJournalEntry(now time.Time, ms []store.Message, es []store.Event) JournalEntry {
	j := JournalEntry{At: Nanos(now), FirstMessage: -1, Messages: len(ms), Events: len(es)}
	switch {
	case len(ms) > 0:
		j.Step, j.At, j.FirstMessage = ms[0].Step, Nanos(ms[0].CreatedAt), ms[0].Seq
	case len(es) > 0:
		j.Step, j.At = es[0].Step, Nanos(es[0].Time)
	}
	if !j.Empty() {
		j.Body = encodeJournal(j.Step, j.At, ms, es)
	}
	return j
}

// Empty reports an entry that appends nothing: no row is written for it.
func (j JournalEntry) Empty() bool { return j.Messages+j.Events == 0 }

// MessageColumn is the first_message column of the entry's row: 0 when it
// holds no message.
func (j JournalEntry) MessageColumn() int { return max(j.FirstMessage, 0) }

// encodeJournal encodes the body of a journal row of the given step and
// time that appends ms and es.
func encodeJournal(step int, atNanos int64, ms []store.Message, es []store.Event) []byte {
	n := 16
	for _, m := range ms {
		n += len(m.Content) + len(m.Role) + 32
	}
	for _, e := range es {
		n += len(e.Data) + len(e.Type) + 32
	}
	b := make([]byte, 0, n)
	b = append(b, `{"m":[`...)
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"r":`...)
		b = appendString(b, m.Role)
		b = appendValue(b, "c", m.Content)
		b = appendPlace(b, step, atNanos, m.Step, m.CreatedAt)
		b = append(b, '}')
	}
	b = append(b, `],"e":[`...)
	for i, e := range es {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"y":`...)
		b = appendString(b, e.Type)
		b = appendValue(b, "d", e.Data)
		b = appendPlace(b, step, atNanos, e.Step, e.Time)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// appendValue appends a field named key holding v as it is, if it is JSON
// that decodes to exactly these bytes, or else in base64 (key + "b").
func appendValue(b []byte, key string, v []byte) []byte {
	if len(v) == 0 {
		return b
	}
	if len(bytes.TrimSpace(v)) == len(v) && json.Valid(v) {
		b = append(b, `,"`...)
		b = append(b, key...)
		b = append(b, `":`...)
		return append(b, v...)
	}
	b = append(b, `,"`...)
	b = append(b, key...)
	b = append(b, `b":"`...)
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

// appendPlace appends the item's step and time where they differ from the
// row's.
func appendPlace(b []byte, rowStep int, rowAt int64, step int, at time.Time) []byte {
	if step != rowStep {
		b = append(b, `,"s":`...)
		b = strconv.AppendInt(b, int64(step), 10)
	}
	if d := Nanos(at) - rowAt; d != 0 {
		b = append(b, `,"t":`...)
		b = strconv.AppendInt(b, d, 10)
	}
	return b
}

// appendString appends s as a JSON string.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// JournalMessages returns the messages of a journal row.
func JournalMessages(j JournalRow) ([]store.Message, error) {
	body, err := decodeBody(j)
	if err != nil {
		return nil, err
	}
	if len(body.Messages) != j.Messages {
		return nil, fmt.Errorf("journal row of run %s at message %d: %d messages, its columns say %d", j.RunID, j.FirstMessage, len(body.Messages), j.Messages)
	}
	out := make([]store.Message, len(body.Messages))
	for i, it := range body.Messages {
		content, err := it.value(it.Content, it.ContentB64, it.ContentHex)
		if err != nil {
			return nil, fmt.Errorf("journal row of run %s: message %d: %w", j.RunID, j.FirstMessage+i, err)
		}
		if content == nil {
			content = []byte{} // a message always has its content, if empty
		}
		step, at := it.place(j)
		out[i] = store.Message{RunID: j.RunID, Seq: j.FirstMessage + i, Step: step, Role: it.Role,
			Content: content, CreatedAt: at}
	}
	return out, nil
}

// JournalEvents returns the events of a journal row whose sequence number
// is above after.
func JournalEvents(j JournalRow, after int64) ([]store.Event, error) {
	body, err := decodeBody(j)
	if err != nil {
		return nil, err
	}
	if len(body.Events) != j.Events {
		return nil, fmt.Errorf("journal row of run %s at event %d: %d events, its columns say %d", j.RunID, j.FirstEvent, len(body.Events), j.Events)
	}
	out := make([]store.Event, 0, len(body.Events))
	for i, it := range body.Events {
		seq := j.FirstEvent + int64(i)
		if seq <= after {
			continue
		}
		data, err := it.value(it.Data, it.DataB64, it.DataHex)
		if err != nil {
			return nil, fmt.Errorf("journal row of run %s: event %d: %w", j.RunID, seq, err)
		}
		step, at := it.place(j)
		out = append(out, store.Event{RunID: j.RunID, Seq: seq, Step: step, Type: it.Type, Time: at, Data: data})
	}
	return out, nil
}

func decodeBody(j JournalRow) (journalBody, error) {
	var body journalBody
	if err := json.Unmarshal(j.Body, &body); err != nil {
		return body, fmt.Errorf("journal row of run %s at step %d: %w", j.RunID, j.Step, err)
	}
	return body, nil
}

func (it journalItem) value(raw json.RawMessage, b64, hx string) ([]byte, error) {
	switch {
	case b64 != "":
		return base64.StdEncoding.DecodeString(b64)
	case hx != "":
		return hex.DecodeString(hx)
	case len(raw) > 0:
		return raw, nil
	}
	return nil, nil
}

func (it journalItem) place(j JournalRow) (int, time.Time) {
	step := j.Step
	if it.Step != nil {
		step = *it.Step
	}
	return step, Time(j.At + it.Delta)
}

// JournalEventsOf returns the events of journal rows, in the rows' order,
// each run's after the cursor after gives for it, and no more than limit of
// them in all (limit < 0: all). A row is cut at the limit, so that what a
// reader gets of each run is the run's next events, in order.
func JournalEventsOf(rows []JournalRow, after func(runID string) int64, limit int) ([]store.Event, error) {
	var out []store.Event
	for _, row := range rows {
		part, err := JournalEvents(row, after(row.RunID))
		if err != nil {
			return nil, err
		}
		if limit >= 0 && len(out)+len(part) > limit {
			return append(out, part[:limit-len(out)]...), nil
		}
		out = append(out, part...)
	}
	return out, nil
}

// Cursors returns where each run's trace is to be read from, by run id.
func Cursors(cs []store.TraceCursor) func(runID string) int64 {
	m := make(map[string]int64, len(cs))
	for _, c := range cs {
		m[c.RunID] = c.After
	}
	return func(runID string) int64 { return m[runID] }
}
