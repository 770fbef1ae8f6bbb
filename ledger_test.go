package belay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// payments is a downstream system that applies every refund it receives and
// can be told to lose responses, as a network does.
type payments struct {
	mu        sync.Mutex
	refunds   []string // charge ids, one per refund actually made
	loseNext  int
	failNext  int
	callCount int
}

func (p *payments) refund(charge string) (json.RawMessage, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.callCount++
	if p.failNext > 0 {
		p.failNext--
		return nil, Transient(errors.New("503 payment provider unavailable"))
	}
	p.refunds = append(p.refunds, charge)
	if p.loseNext > 0 {
		p.loseNext--
		return nil, fmt.Errorf("no response from the payment provider: %w", ErrUnknownOutcome)
	}
	return json.RawMessage(fmt.Sprintf(`{"refund_id":"R-%d"}`, len(p.refunds))), nil
}

func (p *payments) find(charge string) (json.RawMessage, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range p.refunds {
		if c == charge {
			return json.RawMessage(fmt.Sprintf(`{"refund_id":"R-%d","recovered":true}`, i+1)), true
		}
	}
	return nil, false
}

func (p *payments) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.refunds)
}

type refundArgs struct {
	ChargeID string  `json:"charge_id"`
	Amount   float64 `json:"amount"`
	Reason   string  `json:"reason,omitempty"`
}

func refundTool(p *payments, reconcile bool) Tool {
	t := NewTool("refund", "refund a charge", Irreversible, func(ctx context.Context, in refundArgs) (json.RawMessage, error) {
		return p.refund(in.ChargeID)
	})
	t.KeyFields = []string{"charge_id", "amount"}
	if reconcile {
		t.Reconcile = func(ctx context.Context, key string, args json.RawMessage) (json.RawMessage, bool, error) {
			var in refundArgs
			if err := json.Unmarshal(args, &in); err != nil {
				return nil, false, err
			}
			out, found := p.find(in.ChargeID)
			return out, found, nil
		}
	}
	return t
}

func refundCall(charge string, amount any) scripted.Call {
	return scripted.Call{Name: "refund", Args: map[string]any{"charge_id": charge, "amount": amount}}
}

func effectsOf(t *testing.T, st store.Store, runID string) []store.Effect {
	t.Helper()
	effs, err := st.Effects(context.Background(), "", runID)
	if err != nil {
		t.Fatal(err)
	}
	return effs
}

// The model asks for the same refund again under a new tool_use id, with
// the amount written differently: the business key is the same, so the
// ledger answers and the payment system is not called again.
func TestSameIntentUnderANewToolUseIDRefundsOnce(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	p := &payments{}
	agent := &Agent{Name: "a", Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{refundCall("CH-2", 29)}},
		scripted.Reply{Calls: []scripted.Call{refundCall("CH-2", json.Number("29.00"))}},
		scripted.Reply{Calls: []scripted.Call{refundCall("CH-2", 29.0), refundCall("CH-2", 2.9e1)}},
		scripted.Reply{Text: "refunded"},
	), Tools: []Tool{refundTool(p, false)}}
	run := startAndDrain(t, newRuntime(t, st, nil, agent), RunRequest{Agent: "a", User: "u", Input: "refund CH-2"})
	if run.Status != store.StatusDone {
		t.Fatalf("run %s (%s)", run.Status, run.StopDetail)
	}
	if n := p.count(); n != 1 {
		t.Fatalf("%d refunds for one intent asked four times", n)
	}
	msgs := loadMessages(t, st, run.ID)
	for _, i := range []int{2, 4, 6} {
		for _, res := range msgs[i].Content {
			if res.Content != `{"refund_id":"R-1"}` {
				t.Errorf("message %d: result %q, want the recorded refund", i, res.Content)
			}
		}
	}
	effs := effectsOf(t, st, run.ID)
	if len(effs) != 1 || effs[0].State != store.EffectDone || !strings.HasPrefix(effs[0].Key, run.ID+":refund:") {
		t.Fatalf("ledger %+v", effs)
	}
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == model.TypeToolUse && strings.Contains(effs[0].Key, b.ID) {
				t.Errorf("key %s is built from tool_use id %s", effs[0].Key, b.ID)
			}
		}
	}
}

func TestSameKeyWithDifferentArgumentsIsRefused(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	p := &payments{}
	agent := &Agent{Name: "a", Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: "refund", Args: refundArgs{ChargeID: "CH-2", Amount: 29, Reason: "duplicate"}}}},
		scripted.Reply{Calls: []scripted.Call{{Name: "refund", Args: refundArgs{ChargeID: "CH-2", Amount: 29, Reason: "customer asked again"}}}},
		scripted.Reply{Text: "done"},
	), Tools: []Tool{refundTool(p, false)}}
	run := startAndDrain(t, newRuntime(t, st, nil, agent), RunRequest{Agent: "a", User: "u", Input: "refund"})
	res := loadMessages(t, st, run.ID)[4].Content[0]
	if !res.IsError || !strings.Contains(res.Content, "different arguments") || !strings.Contains(res.Content, "nothing was executed") {
		t.Errorf("second call: %+v", res)
	}
	if n := p.count(); n != 1 {
		t.Errorf("%d refunds", n)
	}
}

// A timeout after the charge landed is an unknown outcome; reconcile asks
// the payment system, which has it, so nothing is sent again.
func TestUnknownOutcomeIsReconciledNotRetried(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	p := &payments{loseNext: 1}
	agent := &Agent{Name: "a", Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{refundCall("CH-2", 29)}},
		scripted.Reply{Text: "refunded"},
	), Tools: []Tool{refundTool(p, true)}}
	run := startAndDrain(t, newRuntime(t, st, nil, agent), RunRequest{Agent: "a", User: "u", Input: "refund"})
	if run.Status != store.StatusDone {
		t.Fatalf("run %s (%s)", run.Status, run.StopDetail)
	}
	if p.count() != 1 || p.callCount != 1 {
		t.Fatalf("%d refunds from %d calls, want 1 from 1", p.count(), p.callCount)
	}
	res := loadMessages(t, st, run.ID)[2].Content[0]
	if res.IsError || !strings.Contains(res.Content, "recovered") {
		t.Errorf("result %+v, want the reconciled refund", res)
	}
	got := strings.Join(eventTypes(t, st, run.ID), " ")
	if !strings.Contains(got, "effect_unknown reconcile tool_result") {
		t.Errorf("events %s", got)
	}
}

// Without a way to ask, an unknown outcome is never retried blindly: the
// run pauses for a person with the intent pending.
func TestUnknownOutcomeWithoutReconcilePausesTheRun(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	p := &payments{loseNext: 1}
	agent := &Agent{Name: "a", Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{refundCall("CH-2", 29)}},
		scripted.Reply{Text: "refunded"},
	), Tools: []Tool{refundTool(p, false)}}
	rt := newRuntime(t, st, nil, agent)
	run := startAndDrain(t, rt, RunRequest{Agent: "a", User: "u", Input: "refund"})
	if run.Status != store.StatusPaused || run.StopReason != "unknown_outcome" || !strings.Contains(run.StopDetail, "not retried blindly") {
		t.Fatalf("run %s (%s): %s", run.Status, run.StopReason, run.StopDetail)
	}
	effs := effectsOf(t, st, run.ID)
	if len(effs) != 1 || effs[0].State != store.EffectUnknown || !strings.Contains(run.StopDetail, effs[0].Key) {
		t.Fatalf("ledger %+v; detail %s", effs, run.StopDetail)
	}
	if err := rt.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p.callCount != 1 || p.count() != 1 {
		t.Errorf("%d calls, %d refunds after the pause; want 1 and 1", p.callCount, p.count())
	}
}

// recordingSleeper stands in for the backoff wait and records each delay.
type recordingSleeper struct {
	mu     sync.Mutex
	delays []time.Duration
	clock  *clock
}

func (s *recordingSleeper) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.delays = append(s.delays, d)
	s.mu.Unlock()
	s.clock.Advance(d)
	return nil
}

func TestTransientFailuresAreRetriedWithGrowingJitteredBackoff(t *testing.T) {
	t.Parallel()
	c := newClock()
	sl := &recordingSleeper{clock: c}
	failures := 0
	flaky := NewTool("get_invoice", "read an invoice", Read, func(ctx context.Context, in struct{}) (map[string]string, error) {
		failures++
		if failures <= 5 {
			return nil, Transient(fmt.Errorf("503 billing API timeout (call %d)", failures))
		}
		return map[string]string{"invoice": "INV-1"}, nil
	})
	flaky.Retry = RetryPolicy{MaxAttempts: 6, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	flaky.Breaker = BreakerPolicy{Failures: 10}
	st := openStore(t)
	agent := &Agent{Name: "a", Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: "get_invoice"}}},
		scripted.Reply{Text: "ok"},
	), Tools: []Tool{flaky}}
	rt, err := New(Config{Store: st, Agents: []*Agent{agent}})
	if err != nil {
		t.Fatal(err)
	}
	rt.cfg.now, rt.cfg.sleep = c.Now, sl.sleep
	jitters := []float64{0.9, 0.2, 0.7, 0.5, 1.0}
	rt.cfg.rand = func(n int64) int64 {
		f := jitters[0]
		jitters = jitters[1:]
		return int64(float64(n-1) * f)
	}
	run := startAndDrain(t, rt, RunRequest{Agent: "a", User: "u", Input: "invoice?"})
	if run.Status != store.StatusDone || failures != 6 {
		t.Fatalf("run %s after %d calls", run.Status, failures)
	}
	caps := []time.Duration{100, 200, 400, 800, 1000}
	want := []float64{0.9, 0.2, 0.7, 0.5, 1.0}
	if len(sl.delays) != 5 {
		t.Fatalf("delays %v", sl.delays)
	}
	for i, d := range sl.delays {
		limit := caps[i] * time.Millisecond
		if got := time.Duration(float64(limit) * want[i]); d < got-time.Nanosecond || d > got+time.Nanosecond {
			t.Errorf("delay %d = %v, want %v (jitter %.1f of cap %v)", i+1, d, got, want[i], limit)
		}
	}
	events, _ := st.Events(context.Background(), run.ID)
	var retries int
	for _, e := range events {
		if e.Type == "tool_retry" {
			retries++
			var d struct {
				Attempt  int     `json:"attempt"`
				Error    string  `json:"error"`
				BackoffS float64 `json:"backoff_s"`
			}
			_ = json.Unmarshal(e.Data, &d)
			if d.Attempt != retries || !strings.Contains(d.Error, "503") || d.BackoffS != sl.delays[retries-1].Seconds() {
				t.Errorf("tool_retry event %s", e.Data)
			}
		}
	}
	if retries != 5 {
		t.Errorf("%d tool_retry events, want 5", retries)
	}
}

func TestRetriesRunOutIntoOneReplanHint(t *testing.T) {
	t.Parallel()
	c := newClock()
	calls := 0
	down := NewTool("track", "track a parcel", Read, func(ctx context.Context, in struct{}) (string, error) {
		calls++
		return "", &TransientError{Err: errors.New("courier API 503"), RetryAfter: 2 * time.Second}
	})
	st := openStore(t)
	agent := &Agent{Name: "a", Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: "track"}}},
		scripted.Reply{Text: "tracking is unavailable right now"},
	), Tools: []Tool{down}}
	rt := newRuntime(t, st, c, agent)
	sl := &recordingSleeper{clock: c}
	rt.cfg.sleep = sl.sleep
	run := startAndDrain(t, rt, RunRequest{Agent: "a", User: "u", Input: "where is it?"})
	if calls != 3 {
		t.Errorf("%d calls, want 3 (default MaxAttempts)", calls)
	}
	for _, d := range sl.delays {
		if d < 2*time.Second {
			t.Errorf("backoff %v ignores Retry-After 2s", d)
		}
	}
	res := loadMessages(t, st, run.ID)[2].Content[0]
	var body struct {
		OK        bool   `json:"ok"`
		Retryable bool   `json:"retryable"`
		Hint      string `json:"hint"`
	}
	if err := json.Unmarshal([]byte(res.Content), &body); err != nil || !res.IsError || body.OK || !body.Retryable || !strings.HasPrefix(body.Hint, "REPLAN:") {
		t.Errorf("result %+v (%v)", res, err)
	}
}

// A tool's Retry-After is waited, and the backoff's jitter, drawn over its
// whole window, on top: reads and side effects that one rate limit refused
// together do not all call again at its last instant.
func TestToolRetryAfterGetsFullJitterOnTop(t *testing.T) {
	t.Parallel()
	for _, kind := range []struct {
		name   string
		effect EffectClass
	}{{"read", Read}, {"side effect", Irreversible}} {
		for _, draw := range []string{"bottom", "top"} {
			t.Run(kind.name+"/"+draw, func(t *testing.T) {
				t.Parallel()
				c := newClock()
				calls := 0
				limited := NewTool("track", "track a parcel", kind.effect, func(ctx context.Context, in struct{}) (string, error) {
					calls++
					if calls == 1 {
						return "", &TransientError{Err: errors.New("courier API 429"), RetryAfter: 2 * time.Second}
					}
					return "in transit", nil
				})
				limited.Retry = RetryPolicy{BaseDelay: 300 * time.Millisecond}
				st := openStore(t)
				agent := &Agent{Name: "a", Model: scripted.New(
					scripted.Reply{Calls: []scripted.Call{{Name: "track"}}},
					scripted.Reply{Text: "it is in transit"},
				), Tools: []Tool{limited}}
				rt := newRuntime(t, st, c, agent)
				sl := &recordingSleeper{clock: c}
				rt.cfg.sleep = sl.sleep
				var asked []int64
				rt.cfg.rand = func(n int64) int64 {
					asked = append(asked, n)
					if draw == "top" {
						return n - 1
					}
					return 0
				}
				run := startAndDrain(t, rt, RunRequest{Agent: "a", User: "u", Input: "where is it?"})
				if run.Status != store.StatusDone || calls != 2 {
					t.Fatalf("run %s after %d calls, want done after 2", run.Status, calls)
				}
				want := 2 * time.Second
				if draw == "top" {
					want += 300 * time.Millisecond
				}
				if !slices.Equal(sl.delays, []time.Duration{want}) {
					t.Errorf("backoffs %v, want [%v]", sl.delays, want)
				}
				if !slices.Contains(asked, int64(300*time.Millisecond)+1) {
					t.Errorf("jitter drawn from %v, want a draw over the whole first window (300ms)", asked)
				}
			})
		}
	}
}

func TestPermanentErrorsAreNotRetried(t *testing.T) {
	t.Parallel()
	p := &payments{}
	calls := 0
	strict := NewTool("refund", "refund", Irreversible, func(ctx context.Context, in refundArgs) (string, error) {
		calls++
		return "", fmt.Errorf("charge %s does not exist; look the invoice up first", in.ChargeID)
	})
	st := openStore(t)
	agent := &Agent{Name: "a", Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{refundCall("CH-9", 5)}},
		scripted.Reply{Text: "no such charge"},
	), Tools: []Tool{strict}}
	run := startAndDrain(t, newRuntime(t, st, nil, agent), RunRequest{Agent: "a", User: "u", Input: "refund"})
	if run.Status != store.StatusDone {
		t.Fatalf("run %s (%s): %s", run.Status, run.StopReason, run.StopDetail)
	}
	res := loadMessages(t, st, run.ID)[2].Content[0]
	if calls != 1 || !res.IsError || !strings.Contains(res.Content, "look the invoice up first") {
		t.Errorf("%d calls; result %+v", calls, res)
	}
	if effs := effectsOf(t, st, run.ID); len(effs) != 1 || effs[0].State != store.EffectFailed {
		t.Errorf("ledger %+v, want one failed intent", effs)
	}
	_ = p
}

// The breaker opens after the failures, fails fast without calling,
// half-opens after OpenFor, and a good probe closes it.
func TestCircuitBreakerOpensFailsFastAndCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openStore(t)
		healthy := false
		calls := 0
		track := NewTool("track", "track a parcel", Read, func(ctx context.Context, in struct {
			N int `json:"n"`
		}) (string, error) {
			calls++
			if !healthy {
				return "", Transient(errors.New("courier API 503"))
			}
			return "in transit", nil
		})
		track.Retry = RetryPolicy{MaxAttempts: 1}
		track.Breaker = BreakerPolicy{Failures: 3, Window: time.Minute, OpenFor: 30 * time.Second}
		uses := func(n int) []scripted.Call {
			var cs []scripted.Call
			for i := range n {
				cs = append(cs, scripted.Call{Name: "track", Args: map[string]int{"n": i}})
			}
			return cs
		}
		m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
			if len(req.Messages) == 1 {
				return scripted.Reply{Calls: uses(4)}, nil
			}
			return scripted.Reply{Text: "ok"}, nil
		})
		rt := newRuntime(t, st, nil, &Agent{Name: "a", Model: m, Tools: []Tool{track}})
		run := startAndDrain(t, rt, RunRequest{Agent: "a", User: "u", Input: "track"})
		if calls != 3 {
			t.Fatalf("%d calls reached the courier, want 3 before the breaker opened", calls)
		}
		last := loadMessages(t, st, run.ID)[2].Content[3]
		if !last.IsError || !strings.Contains(last.Content, "temporarily unavailable; do not retry") {
			t.Errorf("fail-fast result %+v", last)
		}

		time.Sleep(31 * time.Second) // fake time: past OpenFor
		healthy = true
		run2 := startAndDrain(t, rt, RunRequest{Agent: "a", User: "u", Input: "track again"})
		if calls != 7 {
			t.Errorf("%d calls after half-open, want 7", calls)
		}
		var transitions []string
		for _, id := range []string{run.ID, run2.ID} {
			events, _ := st.Events(context.Background(), id)
			for _, e := range events {
				if e.Type == "breaker" {
					var d map[string]string
					_ = json.Unmarshal(e.Data, &d)
					transitions = append(transitions, d["from"]+">"+d["to"])
				}
			}
		}
		if got := strings.Join(transitions, " "); got != "closed>open half-open>closed" {
			t.Errorf("breaker transitions %q", got)
		}
		st.Close()
	})
}

// A person answers the unknown outcome: applied, the run continues with the
// given result and never calls again; not applied, it calls again once.
func TestResolvedOutcomeContinuesTheRun(t *testing.T) {
	t.Parallel()
	for _, applied := range []bool{true, false} {
		st := openStore(t)
		p := &payments{loseNext: 1}
		if !applied {
			// The payment system lost the request itself: nothing landed.
			p = &payments{}
		}
		lost := !applied
		tool := refundTool(p, false)
		call := tool.Call
		tool.Call = func(ctx context.Context, args json.RawMessage) (json.RawMessage, error) {
			if lost {
				lost = false
				return nil, fmt.Errorf("connection reset: %w", ErrUnknownOutcome)
			}
			return call(ctx, args)
		}
		agent := &Agent{Name: "a", Model: scripted.New(
			scripted.Reply{Calls: []scripted.Call{refundCall("CH-2", 29)}},
			scripted.Reply{Text: "refunded"},
		), Tools: []Tool{tool}}
		rt := newRuntime(t, st, nil, agent)
		run := startAndDrain(t, rt, RunRequest{Agent: "a", User: "u", Input: "refund"})
		if run.StopReason != "unknown_outcome" {
			t.Fatalf("run %s (%s)", run.Status, run.StopReason)
		}
		key := effectsOf(t, st, run.ID)[0].Key
		ctx := context.Background()
		if _, err := ResolveOutcome(ctx, st, "", run.ID, Outcome{Key: "nope", Applied: true}, "human:ops"); err == nil {
			t.Error("an unknown key was accepted")
		}
		o := Outcome{Key: key, Applied: applied, Result: json.RawMessage(`{"refund_id":"R-found"}`)}
		if _, err := ResolveOutcome(ctx, st, "", run.ID, o, "human:ops"); err != nil {
			t.Fatal(err)
		}
		if err := rt.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		run, _ = st.GetRun(ctx, "", run.ID)
		if run.Status != store.StatusDone || p.count() != 1 {
			t.Errorf("applied=%v: run %s, %d refunds; want done and 1", applied, run.Status, p.count())
		}
		res := loadMessages(t, st, run.ID)[2].Content[0]
		if applied && res.Content != `{"refund_id":"R-found"}` {
			t.Errorf("applied: the model got %q, want the person's result", res.Content)
		}
		if !applied && !strings.Contains(res.Content, "refund_id") {
			t.Errorf("not applied: the model got %q, want the new refund", res.Content)
		}
	}
}
