package belay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// refundDesk is a payment system that records the refunds it made, and
// the model of an agent that asks its customer how to refund, refunds, and
// asks whether anything else is needed.
type refundDesk struct {
	mu      sync.Mutex
	refunds []string // the method of each refund
	asked   int      // model turns that asked the user
}

func (d *refundDesk) agent() *Agent {
	refund := NewTool("refund", "refund the order", Write, func(ctx context.Context, in struct {
		Method string `json:"method"`
	}) (string, error) {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.refunds = append(d.refunds, in.Method)
		return "refunded to " + in.Method, nil
	})
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		answers := toolResults(req.Messages)
		d.mu.Lock()
		defer d.mu.Unlock()
		switch len(answers) {
		case 0:
			d.asked++
			return scripted.Reply{Text: "Asking.", Calls: []scripted.Call{{Name: AskUserTool,
				Args: map[string]string{"question": "Refund to your card or as store credit?"}}}}, nil
		case 1:
			return scripted.Reply{Text: "Refunding.", Calls: []scripted.Call{{Name: "refund",
				Args: map[string]string{"method": answers[0]}}}}, nil
		case 2:
			d.asked++
			return scripted.Reply{Text: "Done; asking.", Calls: []scripted.Call{{Name: AskUserTool,
				Args: map[string]string{"question": "Anything else?"}}}}, nil
		}
		return scripted.Reply{Text: "Refunded to your " + answers[0] + "; you said: " + answers[2]}, nil
	})
	return &Agent{Name: "desk", Version: "v1", Model: m, Tools: []Tool{refund},
		Conversation: &Conversation{IdleTimeout: 24 * time.Hour},
		Requirements: []Requirement{{Name: "refunded once", Check: func(context.Context, RunInfo) (bool, error) {
			d.mu.Lock()
			defer d.mu.Unlock()
			return len(d.refunds) == 1, nil
		}}}}
}

// toolResults are the contents of every tool result of the history.
func toolResults(msgs []model.Message) []string {
	var out []string
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == model.TypeToolResult {
				out = append(out, b.Content)
			}
		}
	}
	return out
}

func drainRun(t *testing.T, rt *Runtime, st store.Store, id string) store.Run {
	t.Helper()
	if err := rt.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	run, err := st.GetRun(context.Background(), AnyTenant, id)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

func TestConversationWaitsAndGoesOn(t *testing.T) {
	st, c, desk := openStore(t), newClock(), &refundDesk{}
	rt := newRuntime(t, st, c, desk.agent())
	ctx := context.Background()
	op := rt.Operator()
	run, _, err := rt.StartRun(ctx, RunRequest{Agent: "desk", Tenant: "acme", User: "ada", Input: "refund my order"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.Say(ctx, "acme", run.ID, Reply{Text: "card"}); !errors.Is(err, store.ErrNotWaiting) {
		t.Errorf("a reply before the run asked: %v, want ErrNotWaiting", err)
	}

	got := drainRun(t, rt, st, run.ID)
	if got.Status != store.StatusWaitingInput || got.LeaseOwner != "" || got.StopReason != "waiting_input" ||
		!strings.Contains(got.StopDetail, "card or as store credit") {
		t.Fatalf("after the first turn the run is %s (%s: %s) owned by %q; want waiting_input with no lease", got.Status, got.StopReason, got.StopDetail, got.LeaseOwner)
	}
	pending, err := op.PendingWaits(ctx, "acme")
	if err != nil || len(pending) != 1 || pending[0].Kind != store.WaitInput || !pending[0].ExpiresAt.Equal(c.Now().Add(24*time.Hour)) {
		t.Fatalf("pending waits %+v, %v", pending, err)
	}
	out, _ := st.Outbox(ctx, run.ID)
	if len(out) != 1 || out[0].Kind != "input_requested" || !strings.Contains(string(out[0].Payload), "store credit") {
		t.Errorf("outbox %+v, want one input_requested with the question", out)
	}
	// Nothing is due while the run waits, however long the workers look.
	c.Advance(20 * time.Hour)
	if again := drainRun(t, rt, st, run.ID); again.Status != store.StatusWaitingInput || again.ModelCalls != 1 {
		t.Fatalf("a drain while the run waits: %s after %d model calls", again.Status, again.ModelCalls)
	}

	// The customer answers the next day; another runtime (a restarted
	// worker) goes on.
	said, err := op.Say(ctx, "acme", run.ID, Reply{Text: "card", Key: "msg-1"})
	if err != nil || said.Repeated || said.Wait.Status != store.WaitAnswered || said.Wait.AnsweredBy != "user:ada" {
		t.Fatalf("say: %+v, %v", said, err)
	}
	if again, err := op.Say(ctx, "acme", run.ID, Reply{Text: "card", Key: "msg-1"}); err != nil || !again.Repeated || again.Wait.ID != said.Wait.ID {
		t.Errorf("the reply again under its key: %+v, %v; want a repeat", again, err)
	}
	rt2 := newRuntime(t, st, c, desk.agent())
	got = drainRun(t, rt2, st, run.ID)
	if got.Status != store.StatusWaitingInput || !strings.Contains(got.StopDetail, "Anything else?") {
		t.Fatalf("after the reply the run is %s (%s), want waiting on its second question", got.Status, got.StopDetail)
	}
	if _, err := op.Say(ctx, "acme", run.ID, Reply{Text: "no, thanks"}); err != nil {
		t.Fatal(err)
	}
	got = drainRun(t, rt2, st, run.ID)
	if got.Status != store.StatusDone || got.StopReason != "verified" {
		t.Fatalf("run ended %s (%s: %s), want done and verified", got.Status, got.StopReason, got.StopDetail)
	}
	if got.Final != "Refunded to your card; you said: no, thanks" {
		t.Errorf("final %q", got.Final)
	}
	desk.mu.Lock()
	defer desk.mu.Unlock()
	if len(desk.refunds) != 1 || desk.refunds[0] != "card" || desk.asked != 2 {
		t.Errorf("refunds %v after %d questions; want one to the card after 2", desk.refunds, desk.asked)
	}
	// The history, the usage and the ledger carried on across the waits.
	if got.ModelCalls != 4 {
		t.Errorf("%d model calls, want 4", got.ModelCalls)
	}
	effects, _ := st.Effects(ctx, "acme", run.ID)
	if len(effects) != 1 || effects[0].State != store.EffectDone {
		t.Errorf("ledger %+v, want the one refund done", effects)
	}
	if _, err := op.Say(ctx, "acme", run.ID, Reply{Text: "one more thing"}); !errors.Is(err, store.ErrNotWaiting) || !strings.Contains(err.Error(), "is done") {
		t.Errorf("a reply to the ended run: %v, want ErrNotWaiting saying it is done", err)
	}
	if _, err := op.Say(ctx, "globex", run.ID, Reply{Text: "card"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a reply from another tenant: %v, want ErrNotFound", err)
	}
}

func TestConversationIdleEnds(t *testing.T) {
	st, c, desk := openStore(t), newClock(), &refundDesk{}
	rt := newRuntime(t, st, c, desk.agent())
	ctx := context.Background()
	run, _, err := rt.StartRun(ctx, RunRequest{Agent: "desk", Tenant: "acme", User: "ada", Input: "refund my order"})
	if err != nil {
		t.Fatal(err)
	}
	drainRun(t, rt, st, run.ID)
	c.Advance(24 * time.Hour)
	got := drainRun(t, rt, st, run.ID)
	if got.Status != store.StatusEscalated || got.StopReason != "conversation_idle" ||
		!strings.Contains(got.StopDetail, "did not reply within 24h0m0s to: Refund to your card") {
		t.Fatalf("an idle conversation ended %s (%s: %s)", got.Status, got.StopReason, got.StopDetail)
	}
	if _, err := rt.Operator().Say(ctx, "acme", run.ID, Reply{Text: "card"}); !errors.Is(err, store.ErrWaitExpired) {
		t.Errorf("a late reply: %v, want ErrWaitExpired", err)
	}
	if len(desk.refunds) != 0 {
		t.Errorf("refunds %v without an answer", desk.refunds)
	}
}

func TestConversationRefusesBadQuestions(t *testing.T) {
	st, c := openStore(t), newClock()
	turns := 0
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		turns++
		if turns == 1 {
			return scripted.Reply{Calls: []scripted.Call{{Name: AskUserTool, Args: map[string]string{"question": " "}}}}, nil
		}
		return scripted.Reply{Text: strings.Join(toolResults(req.Messages), "|")}, nil
	})
	rt := newRuntime(t, st, c, &Agent{Name: "a", Version: "v1", Model: m, Conversation: &Conversation{}})
	run, _, err := rt.StartRun(context.Background(), RunRequest{Agent: "a", Input: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	got := drainRun(t, rt, st, run.ID)
	if got.Status != store.StatusDone || !strings.Contains(got.Final, "ask_user needs a question") {
		t.Errorf("an empty question: run %s with %q; want the model told, and no wait", got.Status, got.Final)
	}
}

func TestConversationAgentChecks(t *testing.T) {
	m := scripted.Func(func(model.Request) (scripted.Reply, error) { return scripted.Reply{Text: "hi"}, nil })
	clash := &Agent{Name: "a", Model: m, Conversation: &Conversation{},
		Tools: []Tool{NewTool(AskUserTool, "mine", Read, func(context.Context, struct{}) (string, error) { return "", nil })}}
	if err := clash.prepare(); err == nil || !strings.Contains(err.Error(), "rename it") {
		t.Errorf("a tool named ask_user beside a conversation: %v", err)
	}
	a := &Agent{Name: "a", Model: m, Conversation: &Conversation{}}
	if err := a.prepare(); err != nil || a.Conversation.IdleTimeout != DefaultIdleTimeout {
		t.Errorf("defaults: %v, idle timeout %v", err, a.Conversation.IdleTimeout)
	}
	specs := a.toolSpecs()
	if len(specs) != 1 || specs[0].Name != AskUserTool {
		t.Errorf("the model is offered %+v, want ask_user", specs)
	}

	// An agent without a conversation keeps the version it had: the hash
	// of what the model sees, as Belay computed it before conversations.
	plain := &Agent{Name: "p", Model: m, Instructions: "be kind"}
	if err := plain.prepare(); err != nil {
		t.Fatal(err)
	}
	before, _ := json.Marshal(struct {
		Model        string
		Instructions string
		Tools        []struct{}
	}{Model: m.Name(), Instructions: "be kind"})
	sum := sha256.Sum256(before)
	if want := hex.EncodeToString(sum[:6]); plain.Version != want {
		t.Errorf("version %s, want %s as before conversations", plain.Version, want)
	}
	talk := &Agent{Name: "p", Model: m, Instructions: "be kind", Conversation: &Conversation{}}
	if err := talk.prepare(); err != nil || talk.Version == plain.Version {
		t.Errorf("a conversation does not change the version (%s): the model sees another tool", talk.Version)
	}
}
