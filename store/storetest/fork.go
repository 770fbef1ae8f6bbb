package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

func forker(t *testing.T, s store.Store) store.Forker {
	t.Helper()
	f, ok := s.(store.Forker)
	if !ok {
		t.Fatalf("%T does not fork runs (store.Forker)", s)
	}
	return f
}

// forkFixture is a parent run with two messages and a done and a failed
// effect, and the params of a fork of it at step 1.
func forkFixture(t *testing.T, s store.Store) (store.Run, store.ForkRunParams) {
	t.Helper()
	parent := newRun(t, s, store.CreateRunParams{ClientRequestID: uniq("req"), Input: "charged twice"})
	c := claimRun(t, s, parent.ID, "w1", t0, time.Hour)
	begun := t0.Add(time.Second)
	done := intent(parent, parent.ID+":refund:aaa", "h1")
	done.Step = 0
	beginEffect(t, s, store.BeginEffectParams{Fence: fence(c), Now: begun, Effect: done})
	failed := intent(parent, parent.ID+":refund:bbb", "h2")
	failed.Step = 0
	beginEffect(t, s, store.BeginEffectParams{Fence: fence(c), Now: begun.Add(time.Second), Effect: failed})
	u := update(c)
	u.Step, u.Messages = 1, 2
	checkpoint(t, s, store.CheckpointParams{Fence: fence(c), Now: begun, Run: u,
		Messages: []store.Message{
			{Seq: 0, Step: 0, Role: "user", Content: []byte(`[{"type":"text","text":"charged twice"}]`), CreatedAt: t0},
			{Seq: 1, Step: 0, Role: "assistant", Content: []byte(`[{"type":"text","text":"PLAN: refund"}]`), CreatedAt: t0},
		},
		Effects: []store.EffectUpdate{
			{Tenant: parent.Tenant, Key: done.Key, State: store.EffectDone, Result: json.RawMessage(`{"refund_id":"RF-1"}`)},
			{Tenant: parent.Tenant, Key: failed.Key, State: store.EffectFailed, Result: json.RawMessage(`{"ok":false}`)},
		}})
	effects, err := s.Effects(t.Context(), parent.Tenant, parent.ID)
	if err != nil || len(effects) != 2 {
		t.Fatalf("Effects of the parent: %d, %v", len(effects), err)
	}
	id := uniq("fork")
	now := t0.Add(time.Hour)
	for i := range effects {
		effects[i].Key = id + effects[i].Key[len(parent.ID):]
	}
	msgs, err := s.Messages(t.Context(), parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	for i := range msgs {
		msgs[i].RunID = id
	}
	return getRun(t, s, parent.ID), store.ForkRunParams{
		Run: store.CreateRunParams{ID: id, Tenant: parent.Tenant, User: parent.User, Agent: parent.Agent,
			AgentVersion: "v1", Input: "charged three times", RequestedBy: "human:ann",
			Budget: json.RawMessage(`{"max_turns":9}`), Now: now,
			Events: []store.Event{
				{Step: 1, Type: "run_created", Time: now, Data: json.RawMessage(`{"agent":"support"}`)},
				{Step: 1, Type: store.EventForked, Time: now, Data: json.RawMessage(`{"parent":"p"}`)},
			}},
		Step: 1, InputTokens: 100, OutputTokens: 20, ModelCalls: 1, CostNanoUSD: 12345,
		Plan: json.RawMessage(`{"version":1}`), Guard: json.RawMessage(`{"rebuild":true}`),
		Messages: msgs, Effects: effects,
		Lineage: store.Lineage{ParentRunID: parent.ID, AtStep: 1, By: "human:ann", Reason: "what if"},
	}
}

// testForkRun: a fork is one queued run with the history, usage, ledger
// and lineage it was given, in the parent's tenant only; it runs on from
// there as any run does.
func testForkRun(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := forker(t, s)
	parent, p := forkFixture(t, s)
	fork, err := f.ForkRun(ctx, p)
	if err != nil {
		t.Fatalf("ForkRun: %v", err)
	}
	if fork.ID != p.Run.ID || fork.Status != store.StatusQueued || fork.Step != 1 || fork.Messages != 2 ||
		fork.InputTokens != 100 || fork.OutputTokens != 20 || fork.ModelCalls != 1 || fork.CostNanoUSD != 12345 ||
		fork.ClientRequestID != "" || fork.Input != "charged three times" || fork.RequestedBy != "human:ann" ||
		string(fork.Plan) != `{"version":1}` || string(fork.Guard) != `{"rebuild":true}` || string(fork.Budget) != `{"max_turns":9}` {
		t.Errorf("fork as returned: %+v", fork)
	}
	if got := getRun(t, s, fork.ID); got.Step != 1 || got.Messages != 2 || got.CostNanoUSD != 12345 {
		t.Errorf("fork as read: step %d, %d messages, cost %d", got.Step, got.Messages, got.CostNanoUSD)
	}
	msgs, err := s.Messages(ctx, fork.ID)
	if err != nil || len(msgs) != 2 || !bytes.Equal(msgs[1].Content, p.Messages[1].Content) || msgs[1].Seq != 1 {
		t.Errorf("fork's messages: %+v, %v", msgs, err)
	}
	events, err := s.Events(ctx, fork.ID)
	if err != nil || len(events) != 2 || events[0].Seq != 1 || events[1].Type != store.EventForked {
		t.Errorf("fork's events: %+v, %v", events, err)
	}
	effects, err := s.Effects(ctx, fork.Tenant, fork.ID)
	if err != nil || len(effects) != 2 {
		t.Fatalf("fork's effects: %d, %v", len(effects), err)
	}
	for i, e := range effects {
		want := p.Effects[i]
		if e.Key != want.Key || e.RunID != fork.ID || e.State != want.State || !bytes.Equal(e.Result, want.Result) ||
			e.Attempts != want.Attempts || e.Step != want.Step || e.ArgsHash != want.ArgsHash || !e.InFlightUntil.IsZero() {
			t.Errorf("fork's effect %d: %+v, want %+v", i, e, want)
		}
	}
	if parentEffects, _ := s.Effects(ctx, parent.Tenant, parent.ID); len(parentEffects) != 2 || parentEffects[0].RunID != parent.ID {
		t.Errorf("parent's effects after the fork: %+v", parentEffects)
	}

	l, err := f.Lineage(ctx, fork.Tenant, fork.ID)
	if err != nil || l.RunID != fork.ID || l.Tenant != fork.Tenant || l.ParentRunID != parent.ID || l.AtStep != 1 ||
		l.By != "human:ann" || l.Reason != "what if" || !l.CreatedAt.Equal(p.Run.Now) {
		t.Errorf("Lineage: %+v, %v", l, err)
	}
	if _, err := f.Lineage(ctx, uniq("tenant"), fork.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Lineage from another tenant: %v, want ErrNotFound", err)
	}
	if _, err := f.Lineage(ctx, "", parent.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Lineage of a run that is no fork: %v, want ErrNotFound", err)
	}
	forks, err := f.Forks(ctx, parent.Tenant, parent.ID)
	if err != nil || len(forks) != 1 || forks[0].RunID != fork.ID {
		t.Errorf("Forks: %+v, %v", forks, err)
	}

	// The ledger answers the carried intent; the fork runs on from its
	// history.
	c := claimRun(t, s, fork.ID, "w2", p.Run.Now, time.Hour)
	carried := intent(fork, p.Effects[0].Key, p.Effects[0].ArgsHash)
	e, existed := beginEffect(t, s, store.BeginEffectParams{Fence: fence(c), Now: p.Run.Now, Effect: carried})
	if !existed || e.State != store.EffectDone || string(e.Result) != `{"refund_id":"RF-1"}` {
		t.Errorf("BeginEffect of a carried intent: existed %v, %+v", existed, e)
	}
	u := update(c)
	u.Step, u.Messages = 2, 3
	checkpoint(t, s, store.CheckpointParams{Fence: fence(c), Now: p.Run.Now, Run: u,
		Messages: []store.Message{{Seq: 2, Step: 2, Role: "user", Content: []byte(`[]`), CreatedAt: p.Run.Now}},
		Events:   []store.Event{{Step: 2, Type: "checkpoint", Time: p.Run.Now, Data: json.RawMessage(`{}`)}}})
	if events, _ := s.Events(ctx, fork.ID); len(events) != 3 || events[2].Seq != 3 {
		t.Errorf("fork's events after a checkpoint: %+v", events)
	}

	bad := p
	bad.Run.ID, bad.Run.ClientRequestID = uniq("fork"), "req"
	if _, err := f.ForkRun(ctx, bad); err == nil {
		t.Error("ForkRun with a client request id: no error")
	}
}

// testForkPrune: a pruned fork takes its lineage with it; a pruned parent
// leaves its fork's lineage naming it.
func testForkPrune(t *testing.T, s store.Store) {
	ctx := t.Context()
	f := forker(t, s)
	parent, p := forkFixture(t, s)
	p.Effects = nil
	fork, err := f.ForkRun(ctx, p)
	if err != nil {
		t.Fatalf("ForkRun: %v", err)
	}
	claimed := claimAll(t, s, "w9", t0.Add(2*time.Hour), time.Hour)
	for _, c := range claimed {
		if c.ID == parent.ID || c.ID == fork.ID {
			park(t, s, c, store.StatusDone, time.Time{})
		}
	}
	for {
		n, err := s.PruneRuns(ctx, store.PruneRunsParams{Before: t0.Add(1000 * time.Hour), Limit: 100})
		if err != nil {
			t.Fatalf("PruneRuns: %v", err)
		}
		if n == 0 {
			break
		}
	}
	if _, err := f.Lineage(ctx, "", fork.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Lineage of a pruned fork: %v, want ErrNotFound", err)
	}
}

// testApprovalParentEffect: an approval names the parent's effect it
// repeats, as written; one that repeats none names none.
func testApprovalParentEffect(t *testing.T, s store.Store) {
	r := newRun(t, s, store.CreateRunParams{})
	c := claimRun(t, s, r.ID, "w1", t0, time.Hour)
	u := update(c)
	u.Status, u.LeaseExpires = store.StatusWaitingApproval, time.Time{}
	parent := &store.ParentEffect{RunID: "run_parent", Key: "run_parent:reply:abc", Step: 5, State: store.EffectDone,
		Result: json.RawMessage(`{"email_id":"EM-1"}`)}
	as := []store.Approval{
		{ID: uniq("ap"), Step: 5, ToolUseID: "toolu_1", Tool: "reply", Args: json.RawMessage(`{}`), ArgsHash: "h1",
			Binding: "b1", ExpiresAt: t0.Add(time.Hour), ParentEffect: parent},
		{ID: uniq("ap"), Step: 5, ToolUseID: "toolu_2", Tool: "note", Args: json.RawMessage(`{}`), ArgsHash: "h2",
			Binding: "b2", ExpiresAt: t0.Add(time.Hour)},
	}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(c), Now: t0, Run: u, Approvals: as})
	got := approvals(t, s, store.ListApprovalsParams{RunID: r.ID})
	if len(got) != 2 {
		t.Fatalf("%d approvals, want 2", len(got))
	}
	if p := got[0].ParentEffect; p == nil || p.RunID != parent.RunID || p.Key != parent.Key || p.Step != 5 ||
		p.State != store.EffectDone || string(p.Result) != string(parent.Result) {
		t.Errorf("listed approval's parent effect: %+v", p)
	}
	if got[1].ParentEffect != nil {
		t.Errorf("an approval that repeats nothing names %+v", got[1].ParentEffect)
	}
	one, err := s.GetApproval(t.Context(), r.Tenant, as[0].ID)
	if err != nil || one.ParentEffect == nil || one.ParentEffect.Key != parent.Key {
		t.Errorf("GetApproval: %+v, %v", one.ParentEffect, err)
	}
	decided, err := s.DecideApproval(t.Context(), store.DecideParams{Tenant: r.Tenant, ID: as[0].ID, Binding: "b1",
		Status: store.ApprovalRejected, By: "human:maya", Now: t0.Add(time.Minute)})
	if err != nil || decided.ParentEffect == nil || decided.ParentEffect.Step != 5 {
		t.Errorf("DecideApproval: %+v, %v", decided.ParentEffect, err)
	}
}
