package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

func testCheckpointRoundTrip(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Minute)

	now := t0.Add(time.Minute + 1)
	u := store.RunUpdate{
		Status:       store.StatusWaitingApproval,
		Step:         3,
		Messages:     7,
		InputTokens:  1200,
		OutputTokens: 345,
		ModelCalls:   4,
		CostNanoUSD:  987654321,
		// Spacing, key order and escapes are kept: the store never
		// re-encodes JSON.
		Plan:         json.RawMessage("{\"steps\": [\"look up\",  \"refund\"],\n  \"note\": \"na\u00efve \u2603\", \"a\": 1}"),
		Guard:        json.RawMessage(`[1, 2,   3, {"z":0,"a":"\u00e9"}]`),
		ResumeAfter:  t0.Add(2*time.Hour + 123),
		StopReason:   "needs_approval",
		StopDetail:   "refund over limit",
		Final:        "Refunded €42.\n",
		LeaseExpires: t0.Add(5*time.Minute + 7),
	}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: now, Run: u})
	want := claimed
	want.Status = u.Status
	want.Step = u.Step
	want.Messages = u.Messages
	want.InputTokens = u.InputTokens
	want.OutputTokens = u.OutputTokens
	want.ModelCalls = u.ModelCalls
	want.CostNanoUSD = u.CostNanoUSD
	want.Plan = u.Plan
	want.Guard = u.Guard
	want.ResumeAfter = u.ResumeAfter
	want.StopReason = u.StopReason
	want.StopDetail = u.StopDetail
	want.Final = u.Final
	want.LeaseExpires = u.LeaseExpires
	want.UpdatedAt = now
	checkRun(t, "checkpointed run", getRun(t, s, r.ID), want)

	// Every field is written, so zero values clear them.
	now = now.Add(time.Second)
	u = store.RunUpdate{Status: store.StatusRunning, LeaseExpires: t0.Add(10 * time.Minute)}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: now, Run: u})
	want = claimed
	want.LeaseExpires = u.LeaseExpires
	want.UpdatedAt = now
	got := getRun(t, s, r.ID)
	checkRun(t, "run checkpointed with zero values", got, want)
	if !got.ResumeAfter.IsZero() {
		t.Errorf("ResumeAfter %s, want the zero time", got.ResumeAfter)
	}
}

// staleFixture returns a run with a message, an event and a pending effect
// written under epoch 1, then claimed again at epoch 2 by the same owner
// (whose lease expired), and the fence of epoch 1, stale by its epoch alone.
func staleFixture(t *testing.T, s store.Store) (store.Run, store.Fence, store.Effect) {
	r := newRun(t, s, store.CreateRunParams{})
	first := claimRun(t, s, r.ID, "w1", t0, time.Minute)
	e, _, err := s.BeginEffect(t.Context(), store.BeginEffectParams{
		Fence: fence(first),
		Now:   t0,
		Effect: store.Effect{
			Tenant: r.Tenant, Key: uniq("key"), RunID: r.ID, Tool: "refund", ArgsHash: "h1",
			Args: json.RawMessage(`{"order":42}`), Step: 1,
		},
	})
	if err != nil {
		t.Fatalf("BeginEffect: %v", err)
	}
	u := update(first)
	u.Step, u.Messages = 1, 1
	checkpoint(t, s, store.CheckpointParams{
		Fence:    fence(first),
		Now:      t0.Add(time.Second),
		Run:      u,
		Messages: []store.Message{{Seq: 0, Step: 1, Role: "user", Content: []byte(`[{"type":"text","text":"hi"}]`), CreatedAt: t0}},
		Events:   []store.Event{{Step: 1, Type: "step", Time: t0}},
	})
	second := claimRun(t, s, r.ID, "w1", t0.Add(2*time.Minute), time.Minute)
	if second.LeaseEpoch != 2 {
		t.Fatalf("second claim at epoch %d, want 2", second.LeaseEpoch)
	}
	return second, fence(first), e
}

// snapshot is everything a run has written.
type snapshot struct {
	run      store.Run
	messages []store.Message
	events   []store.Event
	effects  []store.Effect
}

func snap(t *testing.T, s store.Store, r store.Run) snapshot {
	t.Helper()
	return snapshot{
		run:      getRun(t, s, r.ID),
		messages: messages(t, s, r.ID),
		events:   events(t, s, r.ID),
		effects:  effects(t, s, r.Tenant, r.ID),
	}
}

func (want snapshot) check(t *testing.T, s store.Store, what string) {
	t.Helper()
	got := snap(t, s, want.run)
	checkRun(t, what, got.run, want.run)
	checkMessages(t, what, got.messages, want.messages)
	checkEvents(t, what, got.events, want.events)
	if len(got.effects) != len(want.effects) {
		t.Errorf("%s: %d effects, want %d", what, len(got.effects), len(want.effects))
		return
	}
	for i := range got.effects {
		checkEffect(t, what, got.effects[i], want.effects[i])
	}
}

func testCheckpointStaleEpoch(t *testing.T, s store.Store) {
	run, stale, e := staleFixture(t, s)
	before := snap(t, s, run)

	u := update(run)
	u.Status = store.StatusDone
	u.Step, u.Messages = 9, 2
	u.Final = "late"
	for _, f := range []store.Fence{stale, {RunID: run.ID, Owner: "w2", Epoch: 2}} {
		err := s.Checkpoint(t.Context(), store.CheckpointParams{
			Fence:    f,
			Now:      t0.Add(time.Hour),
			Run:      u,
			Messages: []store.Message{{Seq: 1, Step: 9, Role: "assistant", Content: []byte(`[]`), CreatedAt: t0}},
			Events:   []store.Event{{Step: 9, Type: "late", Time: t0}},
			Effects:  []store.EffectUpdate{{Tenant: e.Tenant, Key: e.Key, State: store.EffectDone, Result: json.RawMessage(`{}`)}},
		})
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("Checkpoint under %+v: %v, want ErrLeaseLost", f, err)
		}
	}
	before.check(t, s, "after stale checkpoints")
}

func testCheckpointTerminal(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	u := update(claimed)
	u.Status = store.StatusDone
	u.Final = "refunded"
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: t0.Add(time.Second), Run: u})
	done := snap(t, s, claimed)

	// The finishing worker still holds the lease; a late write under it
	// must not reopen the run.
	late := update(claimed)
	late.Status = store.StatusRunning
	late.Final = "late"
	err := s.Checkpoint(ctx, store.CheckpointParams{
		Fence:  fence(claimed),
		Now:    t0.Add(2 * time.Second),
		Run:    late,
		Events: []store.Event{{Type: "late", Time: t0}},
	})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Checkpoint of a done run: %v, want ErrLeaseLost", err)
	}
	if err := s.RenewLease(ctx, fence(claimed), t0.Add(2*time.Hour)); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("RenewLease of a done run: %v, want ErrLeaseLost", err)
	}
	_, err = s.TakeOver(ctx, store.TakeOverParams{RunID: r.ID, Epoch: 1, Owner: "w2", Now: t0, TTL: time.Minute})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("TakeOver of a done run: %v, want ErrLeaseLost", err)
	}
	_, _, err = s.BeginEffect(ctx, store.BeginEffectParams{
		Fence:  fence(claimed),
		Now:    t0.Add(2 * time.Second),
		Effect: intent(r, uniq("key"), "h"),
		Events: []store.Event{{Type: "effect_begin", Time: t0}},
	})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("BeginEffect in a done run: %v, want ErrLeaseLost", err)
	}
	done.check(t, s, "done run after late writes")
}

func testLeaseRelease(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	u := update(claimed)
	u.Step = 1
	u.LeaseExpires = time.Time{}
	now := t0.Add(time.Second)
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: now, Run: u})

	released := getRun(t, s, r.ID)
	if released.LeaseOwner != "" || !released.LeaseExpires.IsZero() || released.LeaseEpoch != 1 || released.Step != 1 {
		t.Errorf("released run: owner %q, expires %s, epoch %d, step %d; want \"\", zero, 1, 1",
			released.LeaseOwner, released.LeaseExpires, released.LeaseEpoch, released.Step)
	}
	// Nobody holds a released lease, not even someone naming no owner.
	for _, f := range []store.Fence{fence(claimed), fence(released)} {
		if err := s.Checkpoint(t.Context(), store.CheckpointParams{Fence: f, Now: now, Run: update(claimed)}); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("Checkpoint under %+v after release: %v, want ErrLeaseLost", f, err)
		}
		if err := s.RenewLease(t.Context(), f, now.Add(time.Hour)); !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("RenewLease under %+v after release: %v, want ErrLeaseLost", f, err)
		}
	}

	// A released running run is due at once.
	again := claimRun(t, s, r.ID, "w2", now, time.Minute)
	if again.LeaseOwner != "w2" || again.LeaseEpoch != 2 || again.Step != 1 || again.Status != store.StatusRunning {
		t.Errorf("reclaimed run: owner %q, epoch %d, step %d, status %s; want w2, 2, 1, running",
			again.LeaseOwner, again.LeaseEpoch, again.Step, again.Status)
	}
}

func testMessagesAppendOnly(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	msg := func(seq int, text string) store.Message {
		return store.Message{RunID: r.ID, Seq: seq, Step: 1, Role: "user", Content: []byte(text), CreatedAt: t0}
	}
	u := update(claimed)
	u.Step, u.Messages = 1, 2
	checkpoint(t, s, store.CheckpointParams{
		Fence: fence(claimed), Now: t0, Run: u,
		Messages: []store.Message{msg(0, `"a"`), msg(1, `"b"`)},
	})
	before := snap(t, s, claimed)

	rewrite := update(claimed)
	rewrite.Step, rewrite.Messages = 2, 3
	err := s.Checkpoint(t.Context(), store.CheckpointParams{
		Fence: fence(claimed), Now: t0.Add(time.Second), Run: rewrite,
		Messages: []store.Message{msg(1, `"rewritten"`), msg(2, `"c"`)},
		Events:   []store.Event{{Step: 2, Type: "step", Time: t0}},
	})
	if err == nil {
		t.Fatal("Checkpoint rewriting message 1: no error")
	}
	if errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Checkpoint rewriting message 1: %v; the lease was not lost", err)
	}
	before.check(t, s, "after a rewriting checkpoint")

	// The failure did not cost the lease.
	checkpoint(t, s, store.CheckpointParams{
		Fence: fence(claimed), Now: t0.Add(time.Second), Run: rewrite,
		Messages: []store.Message{msg(2, `"c"`)},
	})
	if got := messages(t, s, r.ID); len(got) != 3 {
		t.Errorf("%d messages after appending, want 3", len(got))
	}
}

func testMessageBytes(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	want := []store.Message{
		{RunID: r.ID, Seq: 0, Step: 0, Role: "user", CreatedAt: t0.Add(1),
			Content: []byte("[{\"type\":\"text\",\"text\":\"  h\u00e9llo\\n\\tw\u00f6rld \U0001F30D  \"}]")},
		{RunID: r.ID, Seq: 1, Step: 1, Role: "assistant", CreatedAt: t0.Add(2),
			Content: []byte("[ {\"type\" : \"tool_use\", \"id\":\"tu_1\",\n  \"input\": {\"z\": 1, \"a\": [ ]}} ]\n")},
		{RunID: r.ID, Seq: 2, Step: 1, Role: "user", CreatedAt: t0.Add(3),
			Content: []byte(`[{"type":"tool_result","tool_use_id":"tu_1","content":"\u00e9\u65e5\u672c"}]`)},
	}
	in := make([]store.Message, len(want))
	copy(in, want)
	for i := range in {
		in[i].RunID = "" // the fence names the run
	}
	u := update(claimed)
	u.Messages = 3
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: t0, Run: u, Messages: in})
	checkMessages(t, "messages", messages(t, s, r.ID), want)
	if got := messages(t, s, uniq("run")); len(got) != 0 {
		t.Errorf("messages of an unknown run: %d", len(got))
	}
}

func testEventsOrdered(t *testing.T, s store.Store) {
	ev := func(runID string, step int, typ string) store.Event {
		return store.Event{RunID: runID, Step: step, Type: typ, Time: t0.Add(time.Duration(step)), Data: json.RawMessage(fmt.Sprintf(`{"step": %d, "s":"\u00e9"}`, step))}
	}
	a := newRun(t, s, store.CreateRunParams{Events: []store.Event{ev("", 0, "created")}})
	b := newRun(t, s, store.CreateRunParams{Events: []store.Event{ev("", 0, "created")}})
	claimed := claimAll(t, s, "w1", t0, time.Hour)
	if len(claimed) != 2 {
		t.Fatalf("claimed %v, want both runs", ids(claimed))
	}
	ca, cb := claimed[0], claimed[1]
	if ca.ID != a.ID {
		ca, cb = cb, ca
	}

	checkpoint(t, s, store.CheckpointParams{Fence: fence(ca), Now: t0, Run: update(ca),
		Events: []store.Event{ev("", 1, "model_call"), ev("", 1, "tool_call"), ev("", 1, "step")}})
	checkpoint(t, s, store.CheckpointParams{Fence: fence(cb), Now: t0, Run: update(cb),
		Events: []store.Event{ev("", 1, "other")}})
	checkpoint(t, s, store.CheckpointParams{Fence: fence(ca), Now: t0, Run: update(ca),
		Events: []store.Event{ev("", 2, "model_call"), ev("", 2, "done")}})

	checkEvents(t, "events of a", events(t, s, a.ID), []store.Event{
		ev(a.ID, 0, "created"),
		ev(a.ID, 1, "model_call"), ev(a.ID, 1, "tool_call"), ev(a.ID, 1, "step"),
		ev(a.ID, 2, "model_call"), ev(a.ID, 2, "done"),
	})
	checkEvents(t, "events of b", events(t, s, b.ID), []store.Event{ev(b.ID, 0, "created"), ev(b.ID, 1, "other")})
	// A run's events are numbered from 1, in the order they were written,
	// whatever other runs write meanwhile.
	for _, id := range []string{a.ID, b.ID} {
		for i, e := range events(t, s, id) {
			if e.Seq != int64(i+1) {
				t.Errorf("event %d of %s: Seq %d, want %d", i, id, e.Seq, i+1)
			}
		}
	}
}

// testLongCheckpoint writes more messages and events in one checkpoint than
// a store is likely to put in one statement, of sizes that share no
// boundary with it.
func testLongCheckpoint(t *testing.T, s store.Store) {
	for _, n := range []int{1, 7, 8, 9, 19} {
		r := newRun(t, s, store.CreateRunParams{})
		claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
		var in, wantMsgs []store.Message
		var es, wantEvents []store.Event
		for i := range n {
			m := store.Message{Seq: i, Step: i / 2, Role: []string{"user", "assistant"}[i%2],
				Content: []byte(fmt.Sprintf(`[{"type":"text","text":"m%d"}]`, i)), CreatedAt: t0.Add(time.Duration(i))}
			in = append(in, m)
			m.RunID = r.ID
			wantMsgs = append(wantMsgs, m)
			e := store.Event{Step: i, Type: fmt.Sprintf("e%d", i), Time: t0.Add(time.Duration(i)),
				Data: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
			es = append(es, e)
			e.RunID = r.ID
			wantEvents = append(wantEvents, e)
		}
		u := update(claimed)
		u.Messages = n
		checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: t0, Run: u, Messages: in, Events: es})
		checkMessages(t, fmt.Sprintf("%d messages", n), messages(t, s, r.ID), wantMsgs)
		checkEvents(t, fmt.Sprintf("%d events", n), events(t, s, r.ID), wantEvents)
	}
}

func testConcurrentCheckpoints(t *testing.T, s store.Store) {
	const runs, steps = 32, 5
	var claimed []store.Run
	for range runs {
		r := newRun(t, s, store.CreateRunParams{})
		claimed = append(claimed, claimRun(t, s, r.ID, "w1", t0, time.Hour))
	}
	var wg sync.WaitGroup
	for _, r := range claimed {
		wg.Go(func() {
			for step := 1; step <= steps; step++ {
				u := update(r)
				u.Step, u.Messages = step, step
				err := s.Checkpoint(t.Context(), store.CheckpointParams{
					Fence: fence(r), Now: t0.Add(time.Duration(step)), Run: u,
					Messages: []store.Message{{Seq: step - 1, Step: step, Role: "user", Content: []byte(`"x"`), CreatedAt: t0}},
					Events:   []store.Event{{Step: step, Type: "step", Time: t0}},
				})
				if err != nil {
					t.Errorf("Checkpoint of run %s step %d: %v", r.ID, step, err)
					return
				}
				// A fenced-off write in the same moment fails alone.
				stale := fence(r)
				stale.Epoch--
				err = s.Checkpoint(t.Context(), store.CheckpointParams{Fence: stale, Now: t0, Run: update(r),
					Events: []store.Event{{Type: "stale", Time: t0}}})
				if !errors.Is(err, store.ErrLeaseLost) {
					t.Errorf("stale Checkpoint of run %s: %v, want ErrLeaseLost", r.ID, err)
				}
			}
		})
	}
	wg.Wait()
	for _, r := range claimed {
		got := getRun(t, s, r.ID)
		if got.Step != steps {
			t.Errorf("run %s at step %d, want %d", r.ID, got.Step, steps)
		}
		if n := len(messages(t, s, r.ID)); n != steps {
			t.Errorf("run %s has %d messages, want %d", r.ID, n, steps)
		}
		if n := len(events(t, s, r.ID)); n != steps {
			t.Errorf("run %s has %d events, want %d", r.ID, n, steps)
		}
	}
}

// A mid-run checkpoint that keeps the lease writes the step and leaves the
// run claimed by its owner; KeepLease with another status is refused.
func testCheckpointKeepLease(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	u := update(claimed)
	u.Step, u.Messages, u.ModelCalls = 3, 6, 3
	u.LeaseExpires = t0.Add(2 * time.Hour)
	u.KeepLease = true
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: t0.Add(time.Minute), Run: u})
	got := getRun(t, s, r.ID)
	if got.Status != store.StatusRunning || got.Step != 3 || got.ModelCalls != 3 || got.LeaseOwner != "w1" || got.LeaseEpoch != claimed.LeaseEpoch {
		t.Errorf("after a KeepLease checkpoint: status %s, step %d, calls %d, owner %q, epoch %d",
			got.Status, got.Step, got.ModelCalls, got.LeaseOwner, got.LeaseEpoch)
	}
	if got.LeaseExpires.Before(claimed.LeaseExpires) {
		t.Errorf("lease shortened to %v from %v", got.LeaseExpires, claimed.LeaseExpires)
	}
	if runs := claimAll(t, s, "w2", t0.Add(30*time.Minute), time.Hour); len(runs) != 0 {
		t.Errorf("a live lease was claimed after a KeepLease checkpoint: %v", ids(runs))
	}
	bad := update(claimed)
	bad.Status, bad.KeepLease = store.StatusDone, true
	if err := s.Checkpoint(t.Context(), store.CheckpointParams{Fence: fence(claimed), Now: t0, Run: bad}); err == nil {
		t.Error("KeepLease with status done was accepted")
	}
}
