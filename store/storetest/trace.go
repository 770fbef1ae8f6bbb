package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// testEventsAfter reads the traces of two runs written in turns, from
// cursors, as a live stream does: every event once, in Seq order, with the
// fields Events gives.
func testEventsAfter(t *testing.T, s store.Store) {
	ev := func(step int, typ string) store.Event {
		return store.Event{Step: step, Type: typ, Time: t0.Add(time.Duration(step)), Data: json.RawMessage(fmt.Sprintf(`{"step":%d}`, step))}
	}
	a := newRun(t, s, store.CreateRunParams{Events: []store.Event{ev(0, "created")}})
	b := newRun(t, s, store.CreateRunParams{Events: []store.Event{ev(0, "created")}})
	claimed := claimAll(t, s, "w1", t0, time.Hour)
	if len(claimed) != 2 {
		t.Fatalf("claimed %v, want both runs", ids(claimed))
	}
	ca, cb := claimed[0], claimed[1]
	if ca.ID != a.ID {
		ca, cb = cb, ca
	}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(ca), Now: t0, Run: update(ca), Events: []store.Event{ev(1, "model_call"), ev(1, "tool_call")}})
	checkpoint(t, s, store.CheckpointParams{Fence: fence(cb), Now: t0, Run: update(cb), Events: []store.Event{ev(1, "other")}})
	checkpoint(t, s, store.CheckpointParams{Fence: fence(ca), Now: t0, Run: update(ca), Events: []store.Event{ev(2, "stop")}})
	allA, allB := events(t, s, a.ID), events(t, s, b.ID)
	if len(allA) != 4 || len(allB) != 2 {
		t.Fatalf("Events: %d and %d events, want 4 and 2", len(allA), len(allB))
	}

	after := func(limit int, cursors ...store.TraceCursor) []store.Event {
		t.Helper()
		es, err := s.EventsAfter(t.Context(), store.EventsAfterParams{Runs: cursors, Limit: limit})
		if err != nil {
			t.Fatalf("EventsAfter: %v", err)
		}
		return es
	}
	// Both traces from their start: merged in the order they were written.
	want := []store.Event{allA[0], allB[0], allA[1], allA[2], allB[1], allA[3]}
	got := after(100, store.TraceCursor{RunID: a.ID}, store.TraceCursor{RunID: b.ID})
	checkEvents(t, "both runs from the start", got, want)
	for i := range min(len(got), len(want)) {
		if got[i].Seq != want[i].Seq {
			t.Errorf("event %d: Seq %d, want %d as Events gives it", i, got[i].Seq, want[i].Seq)
		}
	}

	checkEvents(t, "a after its second event", after(100, store.TraceCursor{RunID: a.ID, After: allA[1].Seq}), allA[2:])
	checkEvents(t, "b after its last event", after(100, store.TraceCursor{RunID: b.ID, After: allB[1].Seq}), nil)
	checkEvents(t, "limit 2", after(2, store.TraceCursor{RunID: a.ID}, store.TraceCursor{RunID: b.ID}), want[:2])
	checkEvents(t, "each from its own cursor",
		after(100, store.TraceCursor{RunID: a.ID, After: allA[2].Seq}, store.TraceCursor{RunID: b.ID, After: allB[0].Seq}),
		[]store.Event{allB[1], allA[3]})
	checkEvents(t, "an unknown run", after(100, store.TraceCursor{RunID: uniq("run")}), nil)
	checkEvents(t, "no runs", after(100), nil)
	checkEvents(t, "limit 0", after(0, store.TraceCursor{RunID: a.ID}), nil)
}
