package belay

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

const planted = "4242-4242-4242-4242"

type cardArgs struct {
	Card   string  `json:"card_number"`
	Amount float64 `json:"amount"`
}

// cardDesk runs an agent that charges a card (a sensitive argument) and
// answers, over a new store, and keeps what its tool received.
type cardDesk struct {
	st *sqlite.Store
	rt *Runtime

	mu   sync.Mutex
	seen []cardArgs
}

func newCardDesk(t *testing.T, policy Policy, humanApproval bool) *cardDesk {
	t.Helper()
	d := &cardDesk{st: openStore(t)}
	charge := NewTool("charge", "charge a card", Irreversible, func(ctx context.Context, in cardArgs) (string, error) {
		d.mu.Lock()
		d.seen = append(d.seen, in)
		d.mu.Unlock()
		return "charged", nil
	})
	charge.Sensitive = []string{"card_number"}
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		if len(req.Messages) == 1 {
			return scripted.Reply{Calls: []scripted.Call{{Name: "charge", Args: cardArgs{Card: planted, Amount: 20}}}}, nil
		}
		return scripted.Reply{Text: "done"}, nil
	})
	if policy == nil {
		policy = DefaultPolicy
	}
	agent := &Agent{Name: "cards", Version: "v1", Model: m, Tools: []Tool{charge}, Policy: policy, PolicyVersion: "p1"}
	rt, err := New(Config{Store: d.st, Agents: []*Agent{agent}, HumanApproval: humanApproval})
	if err != nil {
		t.Fatal(err)
	}
	d.rt = rt
	return d
}

// run starts a run of the card agent for ada and drains it.
func (d *cardDesk) run(t *testing.T, requestedBy string) store.Run {
	t.Helper()
	run, _, err := d.rt.StartRun(context.Background(), RunRequest{Agent: "cards", Tenant: "acme", User: "ada",
		Input: "charge me", RequestedBy: requestedBy})
	if err != nil {
		t.Fatal(err)
	}
	d.drain(t)
	return run
}

func (d *cardDesk) drain(t *testing.T) {
	t.Helper()
	if err := d.rt.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func (d *cardDesk) charged() []cardArgs {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.seen)
}

func TestSensitiveArgumentsNeverReachTheTrace(t *testing.T) {
	t.Parallel()
	d := newCardDesk(t, nil, true)
	st, rt, ctx := d.st, d.rt, context.Background()
	run := d.run(t, "")
	pending, err := st.Approvals(ctx, store.ListApprovalsParams{RunID: run.ID, Status: store.ApprovalPending})
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending approvals %v, %v", pending, err)
	}
	a := pending[0]
	if strings.Contains(a.Summary, planted) {
		t.Errorf("approval summary shows the card: %s", a.Summary)
	}
	// The approval keeps the call redacted, bound to the exact arguments
	// by their hash.
	if strings.Contains(string(a.Args), planted) || !strings.Contains(string(a.Args), Redacted) {
		t.Errorf("the approval keeps the arguments %s", a.Args)
	}
	shown := rt.RedactArgs("cards", "charge", a.Args)
	if strings.Contains(string(shown), planted) || !strings.Contains(string(shown), Redacted) {
		t.Errorf("RedactArgs = %s", shown)
	}
	// The approver edits the amount without seeing the card: the card
	// number comes back from the original call when it runs, and is not
	// written with the edit.
	edited := json.RawMessage(strings.Replace(string(shown), "20", "15", 1))
	decided, err := rt.Decide(ctx, "acme", a.ID, ApprovalDecision{Verdict: "edit", EditedArgs: edited, By: "human:maya"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(decided.EditedArgs), planted) || !strings.Contains(string(decided.EditedArgs), Redacted) {
		t.Errorf("the edit is kept as %s; want it as the editor gave it", decided.EditedArgs)
	}
	if want, _ := argsHash(json.RawMessage(`{"card_number":"` + planted + `","amount":15}`)); decided.EditedHash != want {
		t.Errorf("the edit's hash is not the call that runs")
	}
	d.drain(t)
	if seen := d.charged(); len(seen) != 1 || seen[0].Card != planted || seen[0].Amount != 15 {
		t.Errorf("the tool saw %+v; want the real card and the edited amount", seen)
	}
	evs, err := st.Events(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	redactedCalls := 0
	for _, e := range evs {
		if strings.Contains(string(e.Data), planted) {
			t.Errorf("event %s shows the card: %s", e.Type, e.Data)
		}
		if e.Type == "tool_call" && strings.Contains(string(e.Data), Redacted) {
			redactedCalls++
		}
	}
	if redactedCalls == 0 {
		t.Error("no tool_call event shows the redacted card: the test did not see the call")
	}
	msgs := loadMessages(t, st, run.ID)
	for _, m := range msgs {
		for _, b := range rt.RedactBlocks("cards", m.Content) {
			if strings.Contains(string(b.Input), planted) {
				t.Errorf("RedactBlocks kept the card in %s", b.Input)
			}
		}
	}
}

func TestRequesterCannotApproveOwnRun(t *testing.T) {
	t.Parallel()
	for _, allow := range []bool{false, true} {
		policy := func(ctx context.Context, call PolicyCall) (Decision, error) {
			return Decision{Verdict: NeedsApproval, Reason: "charges need a person", SelfApproval: allow}, nil
		}
		d := newCardDesk(t, policy, true)
		st, rt, ctx := d.st, d.rt, context.Background()
		run := d.run(t, "human:ada")
		pending, _ := st.Approvals(ctx, store.ListApprovalsParams{RunID: run.ID, Status: store.ApprovalPending})
		if len(pending) != 1 {
			t.Fatalf("%d pending approvals", len(pending))
		}
		_, err := rt.Decide(ctx, "acme", pending[0].ID, ApprovalDecision{Verdict: "approve", By: "human:ada"})
		if allow {
			if err != nil {
				t.Errorf("policy allows self-approval, Decide: %v", err)
			}
			continue
		}
		if !errors.Is(err, ErrSelfApproval) {
			t.Fatalf("the requester approved their own run: %v", err)
		}
		if got, _ := st.GetApproval(ctx, "acme", pending[0].ID); got.Status != store.ApprovalPending {
			t.Errorf("after a refused self-approval the approval is %s", got.Status)
		}
		// A tampered decision (another binding) does nothing either.
		_, err = rt.Decide(ctx, "acme", pending[0].ID, ApprovalDecision{Verdict: "approve", By: "human:maya", Binding: "forged"})
		if !errors.Is(err, store.ErrBindingMismatch) {
			t.Errorf("a decision with a forged binding: %v", err)
		}
		if _, err := rt.Decide(ctx, "acme", pending[0].ID, ApprovalDecision{Verdict: "approve", By: "human:maya", Binding: pending[0].Binding}); err != nil {
			t.Fatal(err)
		}
		// Replayed: the second identical decision changes nothing.
		if _, err := rt.Decide(ctx, "acme", pending[0].ID, ApprovalDecision{Verdict: "reject", By: "human:maya", Binding: pending[0].Binding}); !errors.Is(err, store.ErrDecided) {
			t.Errorf("a replayed decision: %v, want ErrDecided", err)
		}
		if got, _ := st.GetApproval(ctx, "acme", pending[0].ID); got.Status != store.ApprovalApproved || got.DecidedBy != "human:maya" {
			t.Errorf("approval %s by %s", got.Status, got.DecidedBy)
		}
	}
}

func TestRunFinishedNotification(t *testing.T) {
	t.Parallel()
	allow := func(ctx context.Context, call PolicyCall) (Decision, error) { return Decision{Verdict: Allow}, nil }
	d := newCardDesk(t, allow, false)
	run := d.run(t, "")
	out, err := d.st.Outbox(context.Background(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || out[0].Kind != "run_finished" || !strings.Contains(string(out[0].Payload), `"status":"done"`) {
		t.Errorf("outbox %+v", out)
	}
}

func TestCancelStopsTheRun(t *testing.T) {
	t.Parallel()
	d := newCardDesk(t, nil, true)
	st, rt, ctx := d.st, d.rt, context.Background()
	run := d.run(t, "")
	if _, err := rt.Cancel(ctx, "other", run.ID, "human:maya", ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("cancel from another tenant: %v", err)
	}
	got, err := rt.Cancel(ctx, "acme", run.ID, "human:maya", "customer withdrew")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusCanceled {
		t.Errorf("status %s", got.Status)
	}
	as, _ := st.Approvals(ctx, store.ListApprovalsParams{RunID: run.ID})
	if len(as) != 1 || as[0].Status != store.ApprovalRejected {
		t.Errorf("approvals after cancel %+v", as)
	}
	d.drain(t)
	if seen := d.charged(); len(seen) != 0 {
		t.Errorf("a canceled run charged %+v", seen)
	}
	if _, err := rt.Cancel(ctx, "acme", run.ID, "human:maya", ""); !errors.Is(err, store.ErrWrongStatus) {
		t.Errorf("canceling twice: %v", err)
	}
}
