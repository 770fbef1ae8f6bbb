package belay

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// bank is a downstream of the tests' own: it counts every charge that lands,
// with the fencing token it was sent under, and can be told to lose its
// answers. A charge under a key it has seen lands again unless the bank
// honours keys.
// lostCallTimeout is the timeout of a tool whose answers the tests lose: a
// lost call takes all of it. It must hold the attempt's own record with
// room to spare on a loaded machine under -race, since a call whose time
// ran out while it was being recorded is not sent (by design) and the
// retries it costs are then counted in the ledger.
const lostCallTimeout = 250 * time.Millisecond

type bank struct {
	mu         sync.Mutex
	honorsKeys bool
	charges    []bankCharge
	// loseAnswers: the next calls land (or not, per lands) and their
	// answers never come back; the caller's context ends first.
	loseAnswers int
	lands       []bool
	// inFlight counts the charges the bank has received and not yet landed.
	inFlight sync.WaitGroup
	// received counts the calls that reached the bank, landed or not.
	received int
}

type bankCharge struct {
	key   string
	token int64
	at    time.Time
}

func (b *bank) charge(ctx context.Context) (json.RawMessage, error) {
	ci, _ := CallInfoFrom(ctx)
	b.mu.Lock()
	b.received++
	lose := b.loseAnswers > 0
	land := true
	if lose {
		b.loseAnswers--
		if len(b.lands) > 0 {
			land, b.lands = b.lands[0], b.lands[1:]
		}
	}
	if land && !(b.honorsKeys && b.has(ci.IdempotencyKey)) {
		b.charges = append(b.charges, bankCharge{key: ci.IdempotencyKey, token: ci.FencingToken, at: time.Now()})
	}
	b.mu.Unlock()
	if lose {
		<-ctx.Done() // the answer never comes back
		return nil, ctx.Err()
	}
	return json.RawMessage(`{"charged":true}`), nil
}

// chargeSlowly hands the charge to the bank, which lands it after delay
// whatever becomes of the caller, as a slow payment system does with a
// request it has received; the caller waits for an answer until its context
// ends.
func (b *bank) chargeSlowly(ctx context.Context, delay time.Duration) (json.RawMessage, error) {
	ci, _ := CallInfoFrom(ctx)
	b.inFlight.Add(1)
	landed := make(chan struct{})
	time.AfterFunc(delay, func() {
		defer b.inFlight.Done()
		b.mu.Lock()
		b.charges = append(b.charges, bankCharge{key: ci.IdempotencyKey, token: ci.FencingToken, at: time.Now()})
		b.mu.Unlock()
		close(landed)
	})
	select {
	case <-landed:
		return json.RawMessage(`{"charged":true}`), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (b *bank) has(key string) bool {
	for _, c := range b.charges {
		if c.key == key {
			return true
		}
	}
	return false
}

func (b *bank) find(key string) (json.RawMessage, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.has(key) {
		return json.RawMessage(`{"charged":true,"found":true}`), true, nil
	}
	return nil, false, nil
}

func (b *bank) landed() []bankCharge {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]bankCharge(nil), b.charges...)
}

// chargeAgent asks for one charge and then answers.
func chargeAgent(tool Tool) *Agent {
	return &Agent{Name: "a", Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: tool.Name, Args: map[string]any{"card": "C-1", "cents": 2900}}}},
		scripted.Reply{Text: "charged"},
	), Tools: []Tool{tool}}
}

// A tool whose downstream honours the key, all of whose calls time out: the
// charge landed with the first, so the outcome is unknown, not failed. The
// model is not told the charge failed; the run waits for a person, and the
// ledger counts every call that went out.
func TestKeyHonouringToolWhoseCallsAllTimeOutIsNotFailed(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	b := &bank{honorsKeys: true, loseAnswers: 3}
	charge := Tool{Name: "charge", Effect: Irreversible, HonorsKey: true, Timeout: lostCallTimeout,
		Retry: RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond},
		Call:  func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) { return b.charge(ctx) }}
	rt := newRuntime(t, st, nil, chargeAgent(charge))
	run := startAndDrain(t, rt, RunRequest{Agent: "a", User: "u", Input: "charge"})

	if run.Status != store.StatusPaused || run.StopReason != "unknown_outcome" {
		t.Fatalf("run %s (%s: %s), want paused on unknown_outcome", run.Status, run.StopReason, run.StopDetail)
	}
	effs := effectsOf(t, st, run.ID)
	if len(effs) != 1 || effs[0].State != store.EffectUnknown || effs[0].Attempts != 3 {
		t.Fatalf("ledger %+v, want one unknown effect after 3 calls", effs)
	}
	if n := len(b.landed()); n != 1 {
		t.Errorf("%d charges landed, want 1: the bank deduplicates by key", n)
	}
	for _, m := range loadMessages(t, st, run.ID) {
		for _, blk := range m.Content {
			if strings.Contains(blk.Content, "failed") {
				t.Errorf("the model was told %q about a charge that landed", blk.Content)
			}
		}
	}
	if !strings.Contains(run.StopDetail, "calls sent under the key: 3") || !strings.Contains(run.StopDetail, effs[0].Key) {
		t.Errorf("stop detail %q does not say how many calls went out under which key", run.StopDetail)
	}
}

// A tool with Reconcile whose call is lost, and whose call made again after
// the downstream said it had nothing is lost too: the downstream is asked
// again, finds the second charge, and the run goes on without a person.
func TestReconciledToolIsAskedAgainAfterEachLostCall(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	// The first call is lost before it lands; the second lands and its
	// answer is lost.
	b := &bank{loseAnswers: 2, lands: []bool{false, true}}
	charge := Tool{Name: "charge", Effect: Irreversible, Timeout: lostCallTimeout,
		Retry: RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond},
		Call:  func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) { return b.charge(ctx) },
		Reconcile: func(ctx context.Context, key string, _ json.RawMessage) (json.RawMessage, bool, error) {
			return b.find(key)
		}}
	run := startAndDrain(t, newRuntime(t, st, nil, chargeAgent(charge)), RunRequest{Agent: "a", User: "u", Input: "charge"})

	if run.Status != store.StatusDone {
		t.Fatalf("run %s (%s: %s), want done", run.Status, run.StopReason, run.StopDetail)
	}
	if n := len(b.landed()); n != 1 {
		t.Errorf("%d charges landed, want 1", n)
	}
	// A call recorded whose time ran out before it could start (its record
	// took longer than the tool's timeout on a loaded machine) is counted by
	// the ledger, which cannot know it never went out, and made again
	// without asking the downstream: the bank still gets two calls.
	var reconciles []string
	unsent := 0
	for _, e := range eventsOf(t, st, run.ID) {
		switch {
		case e.Type == "reconcile":
			reconciles = append(reconciles, string(e.Data))
		case e.Type == "tool_retry" && strings.Contains(string(e.Data), "was not sent"):
			unsent++
		}
	}
	b.mu.Lock()
	received := b.received
	b.mu.Unlock()
	if received != 2 {
		t.Errorf("the bank received %d calls, want 2", received)
	}
	effs := effectsOf(t, st, run.ID)
	if len(effs) != 1 || effs[0].State != store.EffectDone || effs[0].Attempts != 2+unsent || !strings.Contains(string(effs[0].Result), "found") {
		t.Fatalf("ledger %+v, want done from the downstream's record after 2 calls (and %d recorded but not sent)", effs, unsent)
	}
	if len(reconciles) != 2 || !strings.Contains(reconciles[0], `"found":false`) || !strings.Contains(reconciles[1], `"found":true`) {
		t.Errorf("reconcile events %v, want not found then found", reconciles)
	}
}

// partitionedStore is a worker's store once the network to it is cut:
// writes and claims hang (packets dropped, not refused) until their context
// ends.
type partitionedStore struct {
	store.Store
	cut chan struct{}
}

func (s *partitionedStore) hang(ctx context.Context) error {
	select {
	case <-s.cut:
		<-ctx.Done()
		return ctx.Err()
	default:
		return nil
	}
}

func (s *partitionedStore) RenewLease(ctx context.Context, f store.Fence, expires time.Time) error {
	if err := s.hang(ctx); err != nil {
		return err
	}
	return s.Store.RenewLease(ctx, f, expires)
}

func (s *partitionedStore) Checkpoint(ctx context.Context, p store.CheckpointParams) error {
	if err := s.hang(ctx); err != nil {
		return err
	}
	return s.Store.Checkpoint(ctx, p)
}

func (s *partitionedStore) StartAttempt(ctx context.Context, p store.StartAttemptParams) (store.Effect, error) {
	if err := s.hang(ctx); err != nil {
		return store.Effect{}, err
	}
	return s.Store.StartAttempt(ctx, p)
}

func (s *partitionedStore) ClaimRuns(ctx context.Context, p store.ClaimRunsParams) ([]store.Run, error) {
	if err := s.hang(ctx); err != nil {
		return nil, err
	}
	return s.Store.ClaimRuns(ctx, p)
}

// Worker A is cut off from the store while its charge waits to be sent: its
// renewals hang instead of failing. Its tool behaves well: it waits on its
// context and checks it before sending. Worker B takes the run over once
// the lease has expired. A must send nothing after its lease's deadline,
// and B must not charge before A's call could have landed: one charge, made
// under B's fencing token.
func TestWorkerCutOffFromTheStoreSendsNothingAfterItsLease(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	b := &bank{}
	const ttl = 400 * time.Millisecond
	entered := make(chan int64, 4) // the fencing token of each call that starts
	decided := make(chan string, 4)
	charge := Tool{Name: "charge", Effect: Irreversible, Timeout: time.Second,
		Call: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			ci, _ := CallInfoFrom(ctx)
			entered <- ci.FencingToken
			if ci.FencingToken == 1 {
				// A waits longer than its lease before it sends.
				select {
				case <-time.After(ttl * 3 / 2):
				case <-ctx.Done():
				}
				if err := ctx.Err(); err != nil {
					decided <- "not sent: " + err.Error()
					return nil, err
				}
				decided <- "sent"
			}
			return b.charge(ctx)
		},
		Reconcile: func(ctx context.Context, key string, _ json.RawMessage) (json.RawMessage, bool, error) {
			return b.find(key)
		}}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	cutA := &partitionedStore{Store: st, cut: make(chan struct{})}
	a := newChargeWorker(t, cutA, charge, ttl)
	run, _, err := a.StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "charge"})
	if err != nil {
		t.Fatal(err)
	}
	a.Start(ctx)
	defer stopWithin(t, a, time.Second)
	if token := <-entered; token != 1 {
		t.Fatalf("A's call has fencing token %d, want 1", token)
	}
	close(cutA.cut)

	bw := newChargeWorker(t, st, charge, ttl)
	bw.Start(ctx)
	defer stopWithin(t, bw, 10*time.Second)
	got, err := waitStatus(ctx, st, run.ID, store.StatusDone)
	if err != nil {
		t.Fatalf("run did not finish on B: %v", err)
	}
	select {
	case d := <-decided:
		if d == "sent" {
			t.Errorf("A sent its charge after its lease ran out")
		}
	case <-ctx.Done():
		t.Fatal("A's call never returned")
	}
	landed := b.landed()
	if len(landed) != 1 || landed[0].token != got.LeaseEpoch || got.LeaseEpoch < 2 {
		t.Fatalf("charges %+v with the run at epoch %d, want one charge, made by B", landed, got.LeaseEpoch)
	}
	// B waited out A's call before it asked the bank and charged.
	var waited bool
	for _, e := range eventsOf(t, st, run.ID) {
		waited = waited || e.Type == "effect_in_flight"
	}
	if !waited {
		t.Error("B did not wait for A's call to be over before it reconciled")
	}
}

// Worker A's charge has reached a slow bank, which lands it only after A's
// lease has run out, when A is cut off from the store. Worker B takes the
// run over: asked at once, the bank would have nothing to show, and B would
// charge again. B waits until A's call can no longer be in flight, finds
// A's charge, and charges nothing.
func TestSuccessorWaitsOutACallStillInFlight(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	b := &bank{}
	const ttl = 400 * time.Millisecond
	sent := make(chan struct{}, 1)
	charge := Tool{Name: "charge", Effect: Irreversible, Timeout: time.Second,
		Call: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			if ci, _ := CallInfoFrom(ctx); ci.FencingToken == 1 {
				sent <- struct{}{}
				return b.chargeSlowly(ctx, 2*ttl)
			}
			return b.charge(ctx)
		},
		Reconcile: func(ctx context.Context, key string, _ json.RawMessage) (json.RawMessage, bool, error) {
			return b.find(key)
		}}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cutA := &partitionedStore{Store: st, cut: make(chan struct{})}
	a := newChargeWorker(t, cutA, charge, ttl)
	run, _, err := a.StartRun(ctx, RunRequest{Agent: "a", User: "u", Input: "charge"})
	if err != nil {
		t.Fatal(err)
	}
	a.Start(ctx)
	defer stopWithin(t, a, time.Second)
	<-sent
	close(cutA.cut)

	bw := newChargeWorker(t, st, charge, ttl)
	bw.Start(ctx)
	defer stopWithin(t, bw, 10*time.Second)
	got, err := waitStatus(ctx, st, run.ID, store.StatusDone)
	if err != nil {
		t.Fatalf("run did not finish on B: %v", err)
	}
	b.inFlight.Wait()
	if landed := b.landed(); len(landed) != 1 || landed[0].token != 1 {
		t.Fatalf("charges %+v, want A's alone", landed)
	}
	effs := effectsOf(t, st, run.ID)
	if len(effs) != 1 || effs[0].State != store.EffectDone || !strings.Contains(string(effs[0].Result), "found") || got.LeaseEpoch < 2 {
		t.Errorf("ledger %+v at epoch %d, want A's charge found by B", effs, got.LeaseEpoch)
	}
}

// newChargeWorker is a worker of chargeAgent over s, with a short lease and
// a quick poll.
func newChargeWorker(t *testing.T, s store.Store, charge Tool, ttl time.Duration) *Runtime {
	t.Helper()
	agent := chargeAgent(charge)
	agent.Policy, agent.PolicyVersion = allowAll, "allow-all"
	rt, err := New(Config{Store: s, Agents: []*Agent{agent}, LeaseTTL: ttl, PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// waitStatus polls the run until it has status, or ctx ends.
func waitStatus(ctx context.Context, st store.Store, id string, status store.Status) (store.Run, error) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		run, err := st.GetRun(ctx, "", id)
		if err != nil {
			return run, err
		}
		if run.Status == status {
			return run, nil
		}
		select {
		case <-ctx.Done():
			return run, errors.Join(ctx.Err(), errors.New("last seen "+string(run.Status)+" ("+run.StopReason+")"))
		case <-tick.C:
		}
	}
}

func stopWithin(t *testing.T, rt *Runtime, d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_ = rt.Stop(ctx)
}

func eventsOf(t *testing.T, st store.Store, runID string) []store.Event {
	t.Helper()
	events, err := st.Events(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	return events
}
