package belay_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// conversationAgent is faultAgent's charger made a conversation: it asks
// its user how to charge, charges (its one tool, cfg.Tools[0]) with the
// reply, and says so.
func conversationAgent(cfg faultConfig, out io.Writer) *belay.Agent {
	a := faultAgent(cfg, out)
	charge := a.Tools[0].Name
	var mu sync.Mutex
	mark := func(point, run, tool string, token int64) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "%s %s %s %s %s %d\n", faultMarker, cfg.Name, point, run, tool, token)
		if f, ok := out.(*os.File); ok {
			_ = f.Sync()
		}
	}
	script := func(req model.Request) (scripted.Reply, error) {
		var results []string
		for _, m := range req.Messages {
			for _, b := range m.Content {
				if b.Type == model.TypeToolResult {
					results = append(results, b.Content)
				}
			}
		}
		switch len(results) {
		case 0:
			return scripted.Reply{Text: "asking", Calls: []scripted.Call{{Name: belay.AskUserTool,
				Args: map[string]string{"question": "Charge the card or the wallet?"}}}}, nil
		case 1:
			return scripted.Reply{Text: "charging", Calls: []scripted.Call{{Name: charge,
				Args: map[string]any{"step": 1, "cents": 100, "method": results[0]}}}}, nil
		}
		return scripted.Reply{Text: "charged the " + results[0]}, nil
	}
	a.Name = "converser"
	a.Model = slowModel{scripted.Func(script), cfg.ModelWait, mark}
	a.Conversation = &belay.Conversation{IdleTimeout: time.Hour}
	return a
}

// TestConversationSurvivesKills kills worker processes with SIGKILL around
// a conversation, on both stores: A while the run waits for its user's
// reply, B while it resumes with the reply (in the model call that
// follows), C after the charge the reply asked for landed and before its
// answer was recorded; D finishes. The user was asked once, the reply was
// applied once, and the charge landed once.
func TestConversationSurvivesKills(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four worker processes per store")
	}
	for _, kind := range []string{"sqlite", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			conversationKills(t, kind)
		})
	}
}

func conversationKills(t *testing.T, storeKind string) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cfg, st := faultStore(t, storeKind)
	bank := newFaultBank(t)
	cfg.Agent, cfg.Bank, cfg.TTL, cfg.Timeout = "conversation", bank.srv.URL, time.Second, 5*time.Second
	cfg.Tools = []toolKind{honorsKey}
	cfg.ModelWait = [2]time.Duration{400 * time.Millisecond, 400 * time.Millisecond}
	cfg.WaitAfter = [2]time.Duration{400 * time.Millisecond, 400 * time.Millisecond}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{conversationAgent(cfg, io.Discard)}})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "converser", User: "ada", ClientRequestID: "order-1", Input: "charge my order"})
	if err != nil {
		t.Fatal(err)
	}
	status := func() store.Run {
		r, err := st.GetRun(ctx, "", run.ID)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	worker := func(name string) *faultProc {
		c := cfg
		c.Name = name
		return startFaultWorker(t, c)
	}
	kill := func(p *faultProc) {
		p.signal(t, syscall.SIGKILL)
		<-p.done
	}

	a := worker("A")
	if err := testrun.WaitUntil(ctx, func() bool { return status().Status == store.StatusWaitingInput }); err != nil {
		t.Fatalf("the run never waited for its user: %v (status %s); A: %s", err, status().Status, a.tail())
	}
	kill(a)

	// The user answers while no worker runs; a retry of the reply changes
	// nothing.
	op := belay.NewOperator(st)
	if _, err := op.Say(ctx, "", run.ID, belay.Reply{Text: "card", Key: "msg-1"}); err != nil {
		t.Fatal(err)
	}
	if said, err := op.Say(ctx, "", run.ID, belay.Reply{Text: "card", Key: "msg-1"}); err != nil || !said.Repeated {
		t.Fatalf("the reply's retry: %+v, %v", said, err)
	}

	b := worker("B")
	if _, _, err := b.waitMark(ctx, 0, "model"); err != nil {
		t.Fatal(err)
	}
	kill(b)

	c := worker("C")
	if _, _, err := c.waitMark(ctx, 0, "after-send"); err != nil {
		t.Fatal(err)
	}
	kill(c)

	d := worker("D")
	if err := testrun.WaitUntil(ctx, func() bool { return status().Status.Terminal() }); err != nil {
		t.Fatalf("the run did not end: %v; D: %s", err, d.tail())
	}
	got := status()
	if got.Status != store.StatusDone || got.StopReason != "verified" || got.Final != "charged the card" {
		t.Fatalf("run ended %s (%s: %s) with %q; want done, verified, the card charged", got.Status, got.StopReason, got.StopDetail, got.Final)
	}
	if landed := bank.ofRun(run.ID); len(landed) != 1 {
		t.Errorf("%d charges landed, want 1: %+v", len(landed), landed)
	}
	waits, err := st.(store.Waiter).Waits(ctx, store.ListWaitsParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(waits) != 1 || waits[0].Status != store.WaitAnswered || waits[0].AnswerKey != "msg-1" || !strings.Contains(string(waits[0].Answer), "card") {
		t.Errorf("waits %+v; want the one question answered once, with the card", waits)
	}
	events, err := st.Events(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, e := range events {
		counts[e.Type]++
	}
	if counts[store.EventWaitRequested] != 1 || counts[store.EventWaitAnswered] != 1 {
		t.Errorf("trace: %d wait_requested and %d wait_answered, want one of each", counts[store.EventWaitRequested], counts[store.EventWaitAnswered])
	}
	out, err := st.Outbox(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	for _, o := range out {
		if o.Kind == "input_requested" {
			asked++
		}
	}
	if asked != 1 {
		t.Errorf("the user was notified %d times, want once", asked)
	}
	effects, err := st.Effects(ctx, "", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(effects) != 1 || effects[0].State != store.EffectDone || !strings.Contains(string(effects[0].Args), `"card"`) {
		t.Errorf("ledger %+v; want the one charge, with the card, done", effects)
	}
}
