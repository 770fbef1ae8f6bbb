package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/policy"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

// fakeLedger is a tenant's recorded effects; it remembers the start of
// the window it was asked for.
type fakeLedger struct {
	effects []belay.RecordedEffect
	err     error
	since   time.Time
}

func (l *fakeLedger) Recent(_ context.Context, tool string, since time.Time) ([]belay.RecordedEffect, error) {
	l.since = since
	return l.effects, l.err
}

func windowRule(over, extra string) string {
	return `name: refunds
version: 1
default: allow
rules:
  - name: at most 500 USD refunded per day
    tool: refund
    field: amount
    over: ` + over + `
    window: 1d
` + extra + `    above: 500
    decision: needs_approval
`
}

// A total over a window adds this call, the run's own effects and the
// other runs' effects the ledger returns for the window (of the tenant,
// of the same user, or with the same key argument), and asks for approval
// above the limit; the window ends at the call's Now.
func TestWindowTotalsAcrossRuns(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	other := []belay.RecordedEffect{
		{RunID: "r1", User: "ada", Args: json.RawMessage(`{"amount": 200, "customer_id": "c1"}`)},
		{RunID: "r2", User: "bob", Args: json.RawMessage(`{"amount": 250, "customer_id": "c2"}`)},
	}
	cases := []struct {
		name, over, extra string
		user, args        string
		prior             string // the run's own earlier refund, if any
		want              belay.Verdict
	}{
		{"tenant: 200 + 250 + 100 is above 500", "tenant", "", "ada", `{"amount": 100}`, "", belay.NeedsApproval},
		{"tenant: 200 + 250 + 50 is 500", "tenant", "", "ada", `{"amount": 50}`, "", belay.Allow},
		{"user: ada's 200 + her run's 250 + 100", "user", "", "ada", `{"amount": 100}`, `{"amount": 250}`, belay.NeedsApproval},
		{"user: carol's run's 250 + 200", "user", "", "carol", `{"amount": 200}`, `{"amount": 250}`, belay.Allow},
		{"key: c2's 250 + 300", "key", "    key: customer_id\n", "ada", `{"amount": 300, "customer_id": "c2"}`, "", belay.NeedsApproval},
		{"key: c3's own 250 + 200, c1's and c2's apart", "key", "    key: customer_id\n", "ada", `{"amount": 200, "customer_id": "c3"}`,
			`{"amount": 250, "customer_id": "c3"}`, belay.Allow},
		{"key: c3's own 250 + 300", "key", "    key: customer_id\n", "ada", `{"amount": 300, "customer_id": "c3"}`,
			`{"amount": 250, "customer_id": "c3"}`, belay.NeedsApproval},
	}
	for _, c := range cases {
		f, err := policy.Parse("p.yaml", []byte(windowRule(c.over, c.extra)))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		l := &fakeLedger{effects: other}
		var prior []belay.PriorEffect
		if c.prior != "" {
			prior = []belay.PriorEffect{{Tool: "refund", Args: json.RawMessage(c.prior)}}
		}
		d, err := f.Policy()(t.Context(), belay.PolicyCall{Tool: "refund", Effect: belay.Irreversible, Args: json.RawMessage(c.args),
			Run: belay.RunInfo{ID: "r3", Tenant: "acme", User: c.user}, Prior: prior, Now: now, Ledger: l})
		if err != nil || d.Verdict != c.want {
			t.Errorf("%s: %+v (%v), want %s", c.name, d, err, c.want)
		}
		if !l.since.Equal(now.Add(-24 * time.Hour)) {
			t.Errorf("%s: the ledger was asked from %s, want a day before %s", c.name, l.since, now)
		}
	}
}

// A total that cannot be read fails closed: without a ledger the rule
// applies; a ledger that fails makes the policy fail (the run pauses),
// and Decide, which returns no error, refuses.
func TestWindowTotalFailsClosed(t *testing.T) {
	t.Parallel()
	f, err := policy.Parse("p.yaml", []byte(windowRule("tenant", "")))
	if err != nil {
		t.Fatal(err)
	}
	call := belay.PolicyCall{Tool: "refund", Effect: belay.Irreversible, Args: json.RawMessage(`{"amount": 1}`),
		Run: belay.RunInfo{Tenant: "acme", User: "ada"}, Now: time.Now()}
	if d := f.Decide(call); d.Verdict != belay.NeedsApproval || !strings.Contains(d.Reason, "across runs cannot be read") {
		t.Errorf("no ledger: %+v, want the rule to apply", d)
	}
	call.Ledger = &fakeLedger{err: errors.New("store closed")}
	if _, err := f.Policy()(t.Context(), call); err == nil || !strings.Contains(err.Error(), "store closed") {
		t.Errorf("a failing ledger: %v, want its error", err)
	}
	if d := f.Decide(call); d.Verdict != belay.Deny {
		t.Errorf("a failing ledger, Decide: %+v, want deny", d)
	}
}

// Mistakes in a window rule name the field and say what to write.
func TestWindowRuleMistakes(t *testing.T) {
	t.Parallel()
	head := "name: p\nrules:\n  - name: r\n    tool: refund\n    field: amount\n    above: 5\n    decision: deny\n"
	for body, want := range map[string]string{
		"    over: user\n":                               "rules[0].window: missing; over user totals",
		"    over: run\n    window: 1d\n":                "rules[0].window: needs over: tenant, user or key",
		"    over: key\n    window: 1d\n":                "rules[0].key: over: key and key: <argument> go together",
		"    over: tenant\n    window: soon\n":           `rules[0].window: "soon": not a window; write a duration such as 24h`,
		"    over: tenant\n    window: 0d\n":             "a window must be longer than 0",
		"    over: tenant\n    window: 1d\n    key: x\n": "rules[0].key: over: key and key: <argument> go together",
	} {
		_, err := policy.Parse("p.yaml", []byte(head+body))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", body, err, want)
		}
	}
}

// Two runs for one customer, read from the store: the first refunds 300
// and is let through; a second run's 300 would make 600 in the day and is
// sent to a person (or refused, as the rule says), so the two runs
// together never refund more than 500 unasked. Another customer's run is
// judged on its own total.
func TestTwoRunsCannotExceedAWindowTotal(t *testing.T) {
	t.Parallel()
	for _, decision := range []belay.Verdict{belay.NeedsApproval, belay.Deny} {
		t.Run(string(decision), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			f, err := policy.Parse("p.yaml", []byte(strings.Replace(windowRule("user", ""), "needs_approval", string(decision), 1)))
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			refunded := map[string]float64{}
			type refundArgs struct {
				ChargeID string  `json:"charge_id"`
				Amount   float64 `json:"amount"`
			}
			refund := belay.NewTool("refund", "refund a charge", belay.Irreversible, func(ctx context.Context, in refundArgs) (string, error) {
				mu.Lock()
				defer mu.Unlock()
				refunded[in.ChargeID] += in.Amount
				return "refunded", nil
			})
			// Each run asks to refund 300 of the charge its input names,
			// then answers.
			m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
				if len(req.Messages) > 1 {
					return scripted.Reply{Text: "done"}, nil
				}
				charge := req.Messages[0].Content[0].Text
				return scripted.Reply{Calls: []scripted.Call{{Name: "refund", Args: refundArgs{ChargeID: charge, Amount: 300}}}}, nil
			})
			rt, err := belay.New(belay.Config{Store: st, HumanApproval: true,
				Agents: []*belay.Agent{{Name: "a", Model: m, Tools: []belay.Tool{refund}, Policy: f.Policy(), PolicyVersion: f.Version()}}})
			if err != nil {
				t.Fatal(err)
			}
			start := func(user, ticket string) store.Run {
				t.Helper()
				r, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "a", Tenant: "acme", User: user, ClientRequestID: ticket, Input: ticket})
				if err != nil {
					t.Fatal(err)
				}
				if err := rt.Drain(ctx); err != nil {
					t.Fatal(err)
				}
				if r, err = st.GetRun(ctx, "", r.ID); err != nil {
					t.Fatal(err)
				}
				return r
			}
			if r := start("ada", "CH-1"); r.Status != store.StatusDone {
				t.Fatalf("ada's first run: %s (%s), want done", r.Status, r.StopReason)
			}
			if r := start("bob", "CH-2"); r.Status != store.StatusDone {
				t.Fatalf("bob's run: %s (%s), want done: his own total is 300", r.Status, r.StopReason)
			}
			second := start("ada", "CH-3")
			want := store.StatusWaitingApproval
			if decision == belay.Deny {
				want = store.StatusDone
			}
			if second.Status != want {
				t.Errorf("ada's second run: %s (%s), want %s", second.Status, second.StopReason, want)
			}
			mu.Lock()
			defer mu.Unlock()
			if refunded["CH-3"] != 0 || refunded["CH-1"] != 300 || refunded["CH-2"] != 300 {
				t.Errorf("refunded %v, want 300 of CH-1 and of CH-2 and nothing of CH-3 unasked", refunded)
			}
		})
	}
}
