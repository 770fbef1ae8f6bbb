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

	e, existed := beginEffect(t, s, store.BeginEffectParams{
		Fence: f, Now: begun, Effect: in,
		Events: []store.Event{{Step: 2, Type: "effect_begin", Time: begun, Data: json.RawMessage(`{"key":1}`)}},
	})
	if existed {
		t.Error("first BeginEffect: existed true")
	}
	want := in
	want.State = store.EffectPending
	want.Attempts = 1
	want.CreatedAt, want.UpdatedAt = begun, begun
	checkEffect(t, "new effect", e, want)
	checkEvents(t, "events of BeginEffect", events(t, s, r.ID), []store.Event{
		{RunID: r.ID, Step: 2, Type: "effect_begin", Time: begun, Data: json.RawMessage(`{"key":1}`)},
	})

	// The same call again: the outcome is not known, so this is another
	// attempt.
	for attempt := 2; attempt <= 3; attempt++ {
		now := begun.Add(time.Duration(attempt) * time.Second)
		e, existed = beginEffect(t, s, store.BeginEffectParams{Fence: f, Now: now, Effect: in})
		if !existed {
			t.Errorf("BeginEffect attempt %d: existed false", attempt)
		}
		want.Attempts = attempt
		want.UpdatedAt = now
		checkEffect(t, "effect begun again", e, want)
	}

	checkpoint(t, s, store.CheckpointParams{Fence: f, Now: begun.Add(time.Hour), Run: update(claimed),
		Effects: []store.EffectUpdate{{Tenant: r.Tenant, Key: key, State: store.EffectUnknown}}})
	e, _ = beginEffect(t, s, store.BeginEffectParams{Fence: f, Now: begun.Add(2 * time.Hour), Effect: in})
	if e.State != store.EffectUnknown || e.Attempts != 4 {
		t.Errorf("unknown effect begun again: state %s, attempts %d; want unknown, 4", e.State, e.Attempts)
	}

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

	// Same key, other arguments: an error, not a reuse.
	_, _, err := s.BeginEffect(t.Context(), store.BeginEffectParams{Fence: f, Now: settled, Effect: intent(r, key, "h2")})
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
	e, existed := beginEffect(t, s, store.BeginEffectParams{Fence: f, Now: now, Effect: again})
	if existed {
		t.Error("BeginEffect after a failure: existed true, want a new intent")
	}
	if e.State != store.EffectPending || e.Attempts != 2 || len(e.Result) != 0 || e.Step != 5 || !e.UpdatedAt.Equal(now) {
		t.Errorf("begun again: state %s, attempts %d, result %s, step %d, updated %v; want pending, 2, none, 5, %v",
			e.State, e.Attempts, e.Result, e.Step, e.UpdatedAt, now)
	}
}
