package storetest

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

func beginEffect(t *testing.T, s store.Store, p store.BeginEffectParams) (store.Effect, bool) {
	t.Helper()
	e, existed, err := s.BeginEffect(t.Context(), p)
	if err != nil {
		t.Fatalf("BeginEffect %s: %v", p.Effect.Key, err)
	}
	return e, existed
}

func startAttempt(t *testing.T, s store.Store, p store.StartAttemptParams) store.Effect {
	t.Helper()
	e, err := s.StartAttempt(t.Context(), p)
	if err != nil {
		t.Fatalf("StartAttempt %s: %v", p.Key, err)
	}
	return e
}

func intent(r store.Run, key, hash string) store.Effect {
	return store.Effect{
		Tenant:   r.Tenant,
		Key:      key,
		RunID:    r.ID,
		Tool:     "refund",
		ArgsHash: hash,
		Args:     json.RawMessage("{\"order\": 42,  \"amount\":\"\u20ac4.20\"}"),
		Step:     2,
	}
}

func testBeginEffect(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	f := fence(claimed)
	key := uniq("key")
	in := intent(r, key, "h1")
	begun := t0.Add(time.Minute)

	in.InFlightUntil = begun.Add(30 * time.Second)
	e, existed := beginEffect(t, s, store.BeginEffectParams{
		Fence: f, Now: begun, Effect: in,
		Events: []store.Event{{Step: 2, Type: "effect_begin", Time: begun, Data: json.RawMessage(`{"key":1}`)}},
	})
	if existed {
		t.Error("first BeginEffect: existed true")
	}
	want := in
	want.State = store.EffectPending
	want.Attempts, want.Epoch = 1, claimed.LeaseEpoch
	want.CreatedAt, want.UpdatedAt = begun, begun
	checkEffect(t, "new effect", e, want)
	checkEvents(t, "events of BeginEffect", events(t, s, r.ID), []store.Event{
		{RunID: r.ID, Step: 2, Type: "effect_begin", Time: begun, Data: json.RawMessage(`{"key":1}`)},
	})

	// The same intent again: the outcome is not known, and the caller
	// decides what to do; nothing is recorded until it calls.
	again := in
	again.InFlightUntil = begun.Add(time.Hour)
	e, existed = beginEffect(t, s, store.BeginEffectParams{Fence: f, Now: begun.Add(time.Second), Effect: again})
	if !existed {
		t.Error("BeginEffect of a pending key: existed false")
	}
	checkEffect(t, "pending effect begun again", e, want)

	// Each call made again is recorded before it goes out.
	for attempt := 2; attempt <= 3; attempt++ {
		now := begun.Add(time.Duration(attempt) * time.Second)
		e = startAttempt(t, s, store.StartAttemptParams{Fence: f, Now: now, Tenant: r.Tenant, Key: key,
			InFlightUntil: now.Add(time.Minute)})
		want.Attempts = attempt
		want.InFlightUntil = now.Add(time.Minute)
		want.UpdatedAt = now
		checkEffect(t, "attempt started", e, want)
	}

	checkpoint(t, s, store.CheckpointParams{Fence: f, Now: begun.Add(time.Hour), Run: update(claimed),
		Effects: []store.EffectUpdate{{Tenant: r.Tenant, Key: key, State: store.EffectUnknown}}})
	e = startAttempt(t, s, store.StartAttemptParams{Fence: f, Now: begun.Add(2 * time.Hour), Tenant: r.Tenant, Key: key,
		InFlightUntil: begun.Add(3 * time.Hour)})
	if e.State != store.EffectUnknown || e.Attempts != 4 || !e.InFlightUntil.Equal(begun.Add(3*time.Hour)) {
		t.Errorf("attempt under an unknown effect: state %s, attempts %d, in flight until %v; want unknown, 4, %v",
			e.State, e.Attempts, e.InFlightUntil, begun.Add(3*time.Hour))
	}
	want.InFlightUntil = e.InFlightUntil

	// Once done, the recorded result is returned and nothing changes.
	result := json.RawMessage(`{"refund_id": "re_1"}`)
	settled := begun.Add(3 * time.Hour)
	checkpoint(t, s, store.CheckpointParams{Fence: f, Now: settled, Run: update(claimed),
		Effects: []store.EffectUpdate{{Tenant: r.Tenant, Key: key, State: store.EffectDone, Result: result}}})
	want.State, want.Result, want.Attempts, want.UpdatedAt = store.EffectDone, result, 4, settled
	e, existed = beginEffect(t, s, store.BeginEffectParams{Fence: f, Now: begun.Add(4 * time.Hour), Effect: in})
	if !existed {
		t.Error("BeginEffect of a done key: existed false")
	}
	checkEffect(t, "done effect", e, want)
	// A key whose outcome is recorded takes no more calls.
	_, err := s.StartAttempt(t.Context(), store.StartAttemptParams{Fence: f, Now: settled, Tenant: r.Tenant, Key: key})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("StartAttempt of a done key: %v, want ErrNotFound", err)
	}
	_, err = s.StartAttempt(t.Context(), store.StartAttemptParams{Fence: f, Now: settled, Tenant: r.Tenant, Key: uniq("never")})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("StartAttempt of a key never begun: %v, want ErrNotFound", err)
	}
	checkEffect(t, "done effect after refused attempts", effects(t, s, r.Tenant, r.ID)[0], want)

	// Same key, other arguments: an error, not a reuse.
	_, _, err = s.BeginEffect(t.Context(), store.BeginEffectParams{Fence: f, Now: settled, Effect: intent(r, key, "h2")})
	if !errors.Is(err, store.ErrEffectConflict) {
		t.Errorf("BeginEffect with other arguments: %v, want ErrEffectConflict", err)
	}

	second := intent(r, uniq("key"), "h3")
	second.Step = 3
	later := begun.Add(5 * time.Hour)
	e2, _ := beginEffect(t, s, store.BeginEffectParams{Fence: f, Now: later, Effect: second})
	got := effects(t, s, r.Tenant, r.ID)
	if len(got) != 2 {
		t.Fatalf("Effects: %d rows, want 2", len(got))
	}
	checkEffect(t, "first ledger row", got[0], want)
	checkEffect(t, "second ledger row", got[1], e2)
	if n := len(effects(t, s, uniq("tenant"), r.ID)); n != 0 {
		t.Errorf("Effects of the run in another tenant: %d rows", n)
	}
}

func testBeginEffectTenantScope(t *testing.T, s store.Store) {
	a := claimRunOf(t, s, newRun(t, s, store.CreateRunParams{}))
	b := claimRunOf(t, s, newRun(t, s, store.CreateRunParams{}))
	key := uniq("key")

	ea, existed := beginEffect(t, s, store.BeginEffectParams{Fence: fence(a), Now: t0, Effect: intent(a, key, "ha")})
	if existed {
		t.Error("BeginEffect in tenant a: existed true")
	}
	// The same key in another tenant is another effect, even with other
	// arguments.
	eb, existed := beginEffect(t, s, store.BeginEffectParams{Fence: fence(b), Now: t0, Effect: intent(b, key, "hb")})
	if existed {
		t.Error("BeginEffect of the same key in tenant b: existed true")
	}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(a), Now: t0.Add(time.Second), Run: update(a),
		Effects: []store.EffectUpdate{{Tenant: a.Tenant, Key: key, State: store.EffectDone, Result: json.RawMessage(`1`)}}})

	got := effects(t, s, b.Tenant, b.ID)
	if len(got) != 1 {
		t.Fatalf("effects of tenant b: %d rows, want 1", len(got))
	}
	checkEffect(t, "effect of tenant b", got[0], eb)
	got = effects(t, s, a.Tenant, a.ID)
	if len(got) != 1 || got[0].Tenant != a.Tenant || got[0].State != store.EffectDone || ea.Attempts != 1 {
		t.Errorf("effects of tenant a: %+v, want one done row", got)
	}
}

// claimRunOf claims r and no other run.
func claimRunOf(t *testing.T, s store.Store, r store.Run) store.Run {
	t.Helper()
	taken, err := s.ClaimRuns(t.Context(), store.ClaimRunsParams{Owner: "w1", Now: t0, TTL: time.Hour, Limit: 1})
	if err != nil {
		t.Fatalf("ClaimRuns: %v", err)
	}
	if len(taken) != 1 || taken[0].ID != r.ID {
		t.Fatalf("ClaimRuns: %v, want [%s]", ids(taken), r.ID)
	}
	return taken[0]
}

func testBeginEffectStaleFence(t *testing.T, s store.Store) {
	run, stale, e := staleFixture(t, s)
	before := snap(t, s, run)
	for _, f := range []store.Fence{stale, {RunID: run.ID, Owner: "w2", Epoch: 2}, {RunID: uniq("run"), Owner: "w1", Epoch: 2}} {
		_, _, err := s.BeginEffect(t.Context(), store.BeginEffectParams{
			Fence:  f,
			Now:    t0.Add(time.Hour),
			Effect: intent(run, uniq("key"), "h"),
			Events: []store.Event{{Type: "effect_begin", Time: t0}},
		})
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("BeginEffect under %+v: %v, want ErrLeaseLost", f, err)
		}
		// An existing key under a stale fence gains no attempt.
		_, _, err = s.BeginEffect(t.Context(), store.BeginEffectParams{Fence: f, Now: t0.Add(time.Hour), Effect: e})
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("BeginEffect of an existing key under %+v: %v, want ErrLeaseLost", f, err)
		}
		_, err = s.StartAttempt(t.Context(), store.StartAttemptParams{Fence: f, Now: t0.Add(time.Hour), Tenant: e.Tenant, Key: e.Key,
			InFlightUntil: t0.Add(2 * time.Hour), LeaseExpires: t0.Add(3 * time.Hour), Events: []store.Event{{Type: "attempt", Time: t0}}})
		if !errors.Is(err, store.ErrLeaseLost) {
			t.Errorf("StartAttempt under %+v: %v, want ErrLeaseLost", f, err)
		}
	}
	before.check(t, s, "after stale BeginEffect")
}

func testCheckpointSettlesEffect(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	e, _ := beginEffect(t, s, store.BeginEffectParams{Fence: fence(claimed), Now: t0, Effect: intent(r, uniq("key"), "h")})

	result := json.RawMessage("{\"refund_id\": \"re_1\",\n \"amount\": 4200 , \"note\":\"\u00e9\"}")
	now := t0.Add(time.Minute)
	checkpoint(t, s, store.CheckpointParams{Fence: fence(claimed), Now: now, Run: update(claimed),
		Effects: []store.EffectUpdate{{Tenant: e.Tenant, Key: e.Key, State: store.EffectDone, Result: result}}})

	want := e
	want.State = store.EffectDone
	want.Result = result
	want.UpdatedAt = now
	got := effects(t, s, r.Tenant, r.ID)
	if len(got) != 1 {
		t.Fatalf("Effects: %d rows, want 1", len(got))
	}
	checkEffect(t, "settled effect", got[0], want)
}

func testCheckpointMissingEffect(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	e, _ := beginEffect(t, s, store.BeginEffectParams{Fence: fence(claimed), Now: t0, Effect: intent(r, uniq("key"), "h")})
	before := snap(t, s, claimed)

	u := update(claimed)
	u.Step, u.Messages = 1, 1
	err := s.Checkpoint(t.Context(), store.CheckpointParams{
		Fence:    fence(claimed),
		Now:      t0.Add(time.Minute),
		Run:      u,
		Messages: []store.Message{{Seq: 0, Step: 1, Role: "user", Content: []byte(`"x"`), CreatedAt: t0}},
		Events:   []store.Event{{Step: 1, Type: "step", Time: t0}},
		Effects: []store.EffectUpdate{
			{Tenant: e.Tenant, Key: e.Key, State: store.EffectDone, Result: json.RawMessage(`1`)},
			{Tenant: e.Tenant, Key: uniq("missing"), State: store.EffectDone, Result: json.RawMessage(`2`)},
		},
	})
	if err == nil {
		t.Fatal("Checkpoint settling a key never begun: no error")
	}
	before.check(t, s, "after a checkpoint settling a missing key")
}

// A failed effect is known not to have landed: beginning it again starts a
// new intent (pending, existed false) rather than an unknown-outcome retry.
func testBeginEffectAfterFailure(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	f := fence(claimed)
	in := intent(r, uniq("key"), "h")
	beginEffect(t, s, store.BeginEffectParams{Fence: f, Now: t0, Effect: in})
	failure := json.RawMessage(`{"ok":false,"error":"card declined"}`)
	checkpoint(t, s, store.CheckpointParams{Fence: f, Now: t0.Add(time.Second), Run: update(claimed),
		Effects: []store.EffectUpdate{{Tenant: r.Tenant, Key: in.Key, State: store.EffectFailed, Result: failure}}})
	if got := effects(t, s, r.Tenant, r.ID); len(got) != 1 || got[0].State != store.EffectFailed || string(got[0].Result) != string(failure) {
		t.Fatalf("failed effect recorded as %+v", got)
	}

	again := in
	again.Step = 5
	now := t0.Add(time.Minute)
	again.InFlightUntil = now.Add(30 * time.Second)
	e, existed := beginEffect(t, s, store.BeginEffectParams{Fence: f, Now: now, Effect: again})
	if existed {
		t.Error("BeginEffect after a failure: existed true, want a new intent")
	}
	if e.State != store.EffectPending || e.Attempts != 2 || len(e.Result) != 0 || e.Step != 5 || !e.UpdatedAt.Equal(now) {
		t.Errorf("begun again: state %s, attempts %d, result %s, step %d, updated %v; want pending, 2, none, 5, %v",
			e.State, e.Attempts, e.Result, e.Step, e.UpdatedAt, now)
	}
	if !e.InFlightUntil.Equal(again.InFlightUntil) || e.Epoch != claimed.LeaseEpoch {
		t.Errorf("begun again: in flight until %v at epoch %d, want %v at %d", e.InFlightUntil, e.Epoch, again.InFlightUntil, claimed.LeaseEpoch)
	}
}

// A write that precedes a call renews the lease when asked, so the call
// starts with the whole of it; under a lease another worker took, it
// renews nothing.
func testEffectWritesRenewTheLease(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Minute)
	f := fence(claimed)
	in := intent(r, uniq("key"), "h")
	renewed := t0.Add(10 * time.Minute)
	beginEffect(t, s, store.BeginEffectParams{Fence: f, Now: t0, Effect: in, LeaseExpires: renewed})
	if got := getRun(t, s, r.ID); !got.LeaseExpires.Equal(renewed) || got.LeaseEpoch != claimed.LeaseEpoch {
		t.Errorf("after BeginEffect with a renewal: lease expires %v at epoch %d, want %v at %d", got.LeaseExpires, got.LeaseEpoch, renewed, claimed.LeaseEpoch)
	}
	again := t0.Add(20 * time.Minute)
	startAttempt(t, s, store.StartAttemptParams{Fence: f, Now: t0, Tenant: r.Tenant, Key: in.Key, LeaseExpires: again})
	if got := getRun(t, s, r.ID); !got.LeaseExpires.Equal(again) {
		t.Errorf("after StartAttempt with a renewal: lease expires %v, want %v", got.LeaseExpires, again)
	}
	// Without a renewal the lease is left as it is.
	startAttempt(t, s, store.StartAttemptParams{Fence: f, Now: t0, Tenant: r.Tenant, Key: in.Key})
	if got := getRun(t, s, r.ID); !got.LeaseExpires.Equal(again) {
		t.Errorf("after StartAttempt without a renewal: lease expires %v, want %v", got.LeaseExpires, again)
	}
}

// EndCalls marks the last call under a key over, so a successor need not
// wait for it; settled keys, calls already over and other tenants' keys are
// left alone, and a stale fence changes nothing.
func testEndCalls(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{})
	claimed := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	f := fence(claimed)
	pending := intent(r, uniq("key"), "h1")
	pending.InFlightUntil = t0.Add(time.Minute)
	beginEffect(t, s, store.BeginEffectParams{Fence: f, Now: t0, Effect: pending})
	done := intent(r, uniq("key"), "h2")
	done.InFlightUntil = t0.Add(time.Minute)
	beginEffect(t, s, store.BeginEffectParams{Fence: f, Now: t0, Effect: done})
	checkpoint(t, s, store.CheckpointParams{Fence: f, Now: t0, Run: update(claimed),
		Effects: []store.EffectUpdate{{Tenant: r.Tenant, Key: done.Key, State: store.EffectDone, Result: json.RawMessage(`1`)}}})

	stale := f
	stale.Epoch++
	if err := s.EndCalls(t.Context(), store.EndCallsParams{Fence: stale, Now: t0.Add(time.Second), Tenant: r.Tenant, Keys: []string{pending.Key}}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("EndCalls under a stale fence: %v, want ErrLeaseLost", err)
	}
	ended := t0.Add(2 * time.Second)
	if err := s.EndCalls(t.Context(), store.EndCallsParams{Fence: f, Now: ended, Tenant: r.Tenant, Keys: []string{pending.Key, done.Key, uniq("never")}}); err != nil {
		t.Fatalf("EndCalls: %v", err)
	}
	got := effects(t, s, r.Tenant, r.ID)
	if len(got) != 2 {
		t.Fatalf("Effects: %d rows, want 2", len(got))
	}
	for _, e := range got {
		switch e.Key {
		case pending.Key:
			if !e.InFlightUntil.IsZero() || e.State != store.EffectPending || !e.UpdatedAt.Equal(ended) {
				t.Errorf("ended call: %s, in flight until %v, updated %v; want pending, not in flight, updated %v", e.State, e.InFlightUntil, e.UpdatedAt, ended)
			}
		case done.Key:
			if !e.InFlightUntil.Equal(done.InFlightUntil) {
				t.Errorf("settled key: in flight until %v, want it left at %v", e.InFlightUntil, done.InFlightUntil)
			}
		}
	}
	// A later EndCalls finds nothing in flight and changes nothing.
	if err := s.EndCalls(t.Context(), store.EndCallsParams{Fence: f, Now: ended.Add(time.Hour), Tenant: r.Tenant, Keys: []string{pending.Key}}); err != nil {
		t.Fatalf("EndCalls again: %v", err)
	}
	for _, e := range effects(t, s, r.Tenant, r.ID) {
		if e.Key == pending.Key && !e.UpdatedAt.Equal(ended) {
			t.Errorf("ended call updated at %v by a later EndCalls, want left at %v", e.UpdatedAt, ended)
		}
	}
}
