package sqlrow

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/belayrun/belay/store"
)

var t0 = time.Date(2026, 12, 3, 9, 0, 0, 123456789, time.UTC)

// roundTrip writes ms and es as a journal row whose first event has
// sequence number firstEvent, and reads them back.
func roundTrip(t *testing.T, ms []store.Message, es []store.Event, firstEvent int64) ([]store.Message, []store.Event) {
	t.Helper()
	j := NewJournalEntry(t0, ms, es)
	if !json.Valid(j.Body) {
		t.Fatalf("body is not JSON: %s", j.Body)
	}
	row := JournalRow{RunID: "r", Step: j.Step, At: j.At, FirstMessage: j.MessageColumn(), Messages: j.Messages,
		FirstEvent: firstEvent, Events: j.Events, Body: j.Body}
	gotMs, err := JournalMessages(row)
	if err != nil {
		t.Fatal(err)
	}
	gotEs, err := JournalEvents(row, 0)
	if err != nil {
		t.Fatal(err)
	}
	return gotMs, gotEs
}

func TestJournalKeepsEveryByte(t *testing.T) {
	ms := []store.Message{
		{Seq: 7, Step: 3, Role: "user", CreatedAt: t0, Content: []byte(`[{"type":"text","text":"h\u00e9llo \"w\" 🌍"}]`)},
		// White space around the value would be lost if kept as JSON.
		{Seq: 8, Step: 3, Role: "assistant", CreatedAt: t0.Add(time.Millisecond), Content: []byte("[ {\"a\" : 1} ]\n")},
		{Seq: 9, Step: 4, Role: "tool\"role\n", CreatedAt: time.Time{}, Content: []byte("not json \xff")},
		{Seq: 10, Step: 4, Role: "user", CreatedAt: t0, Content: nil},
	}
	es := []store.Event{
		{Step: 3, Type: "model_call", Time: t0.Add(-time.Second), Data: json.RawMessage(`{"step": 1, "s":"\u00e9"}`)},
		{Step: 5, Type: "checkpoint", Time: t0.Add(time.Hour), Data: json.RawMessage(`null`)},
		{Step: 3, Type: "odd", Time: t0, Data: json.RawMessage(`{"x":1}  `)},
		{Step: 3, Type: "empty", Time: t0},
	}
	gotMs, gotEs := roundTrip(t, ms, es, 41)
	if len(gotMs) != len(ms) || len(gotEs) != len(es) {
		t.Fatalf("%d messages and %d events back, want %d and %d", len(gotMs), len(gotEs), len(ms), len(es))
	}
	for i, m := range ms {
		g := gotMs[i]
		if g.Seq != m.Seq || g.Step != m.Step || g.Role != m.Role || !g.CreatedAt.Equal(m.CreatedAt) ||
			!bytes.Equal(g.Content, m.Content) || g.RunID != "r" {
			t.Errorf("message %d: %+v (%q), want %+v (%q)", i, g, g.Content, m, m.Content)
		}
	}
	for i, e := range es {
		g := gotEs[i]
		if g.Seq != 41+int64(i) || g.Step != e.Step || g.Type != e.Type || !g.Time.Equal(e.Time) ||
			!bytes.Equal(g.Data, e.Data) || g.RunID != "r" {
			t.Errorf("event %d: %+v (%q), want seq %d %+v (%q)", i, g, g.Data, 41+i, e, e.Data)
		}
	}
	if !gotMs[2].CreatedAt.IsZero() {
		t.Errorf("a zero time came back as %v", gotMs[2].CreatedAt)
	}
}

// The items of a step share its step and its time: they are not written
// again for each.
func TestJournalWritesWhatDiffersOnly(t *testing.T) {
	ms := []store.Message{
		{Seq: 2, Step: 1, Role: "user", CreatedAt: t0, Content: []byte(`[]`)},
		{Seq: 3, Step: 1, Role: "assistant", CreatedAt: t0, Content: []byte(`[]`)},
	}
	es := []store.Event{{Step: 1, Type: "model_call", Time: t0, Data: json.RawMessage(`{}`)}}
	j := NewJournalEntry(t0, ms, es)
	want := `{"m":[{"r":"user","c":[]},{"r":"assistant","c":[]}],"e":[{"y":"model_call","d":{}}]}`
	if string(j.Body) != want {
		t.Errorf("body %s, want %s", j.Body, want)
	}
	if j.Step != 1 || j.At != Nanos(t0) || j.FirstMessage != 2 || j.Messages != 2 || j.Events != 1 {
		t.Errorf("entry %+v", j)
	}
	if e := NewJournalEntry(t0, nil, nil); !e.Empty() || e.Body != nil {
		t.Errorf("an entry of nothing: %+v", e)
	}
	if e := NewJournalEntry(t0, nil, es); e.FirstMessage != -1 || e.MessageColumn() != 0 {
		t.Errorf("an entry without messages: first message %d, column %d", e.FirstMessage, e.MessageColumn())
	}
}

func TestJournalEventsAfter(t *testing.T) {
	es := []store.Event{{Type: "a", Time: t0}, {Type: "b", Time: t0}, {Type: "c", Time: t0}}
	j := NewJournalEntry(t0, nil, es)
	row := JournalRow{RunID: "r", Step: j.Step, At: j.At, FirstEvent: 10, Events: 3, Body: j.Body}
	got, err := JournalEvents(row, 11)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Seq != 12 || got[0].Type != "c" {
		t.Errorf("events after 11: %+v, want c at 12", got)
	}
}

// A body that does not hold what its columns say is refused, not read short.
func TestJournalRefusesARowAtOddsWithItsColumns(t *testing.T) {
	j := NewJournalEntry(t0, []store.Message{{Seq: 0, Role: "user", Content: []byte(`[]`)}}, nil)
	for name, row := range map[string]JournalRow{
		"more messages counted": {RunID: "r", Messages: 2, Body: j.Body},
		"events counted":        {RunID: "r", Messages: 1, Events: 1, Body: j.Body},
		"not JSON":              {RunID: "r", Messages: 1, Body: []byte(`{"m":[`)},
		"bad base64":            {RunID: "r", Messages: 1, Body: []byte(`{"m":[{"r":"user","cb":"%%"}],"e":[]}`)},
	} {
		_, errM := JournalMessages(row)
		_, errE := JournalEvents(row, 0)
		if errM == nil && errE == nil {
			t.Errorf("%s: read without an error", name)
		}
	}
}

// Rows moved by the migrations hold content and data in hex.
func TestJournalReadsHex(t *testing.T) {
	row := JournalRow{RunID: "r", Step: 2, At: 5, FirstMessage: 3, Messages: 1, FirstEvent: 1, Events: 1,
		Body: []byte(`{"m":[{"r":"user","cx":"205b5d0a"}],"e":[{"y":"created","dx":"7b7d"}]}`)}
	ms, err := JournalMessages(row)
	if err != nil || len(ms) != 1 || string(ms[0].Content) != " []\n" || ms[0].Seq != 3 || ms[0].CreatedAt != Time(5) {
		t.Errorf("messages from hex: %+v, %v", ms, err)
	}
	es, err := JournalEvents(row, 0)
	if err != nil || len(es) != 1 || string(es[0].Data) != "{}" || es[0].Type != "created" {
		t.Errorf("events from hex: %+v, %v", es, err)
	}
}

func FuzzJournal(f *testing.F) {
	f.Add([]byte(`[{"type":"text"}]`), []byte(`{"a":1}`), "user", "model_call", int64(3), 2)
	f.Add([]byte(" x"), []byte("\xff"), "a\"b", "", int64(-7), -1)
	f.Fuzz(func(t *testing.T, content, data []byte, role, typ string, delta int64, step int) {
		// Roles and types are text, as PostgreSQL's text columns held them.
		if !utf8.ValidString(role) || !utf8.ValidString(typ) {
			t.Skip()
		}
		ms := []store.Message{{Seq: 0, Step: step, Role: role, CreatedAt: t0.Add(time.Duration(delta)), Content: content}}
		es := []store.Event{{Step: step + 1, Type: typ, Time: t0.Add(-time.Duration(delta)), Data: data}}
		gotMs, gotEs := roundTrip(t, ms, es, 1)
		if len(gotMs) != 1 || len(gotEs) != 1 {
			t.Fatalf("%d messages, %d events", len(gotMs), len(gotEs))
		}
		if g := gotMs[0]; !bytes.Equal(g.Content, content) || g.Role != role || g.Step != step || !g.CreatedAt.Equal(ms[0].CreatedAt) {
			t.Errorf("message %+v, want %+v", g, ms[0])
		}
		if g := gotEs[0]; !bytes.Equal(g.Data, data) || g.Type != typ || g.Step != step+1 || !g.Time.Equal(es[0].Time) {
			t.Errorf("event %+v, want %+v", g, es[0])
		}
	})
}
