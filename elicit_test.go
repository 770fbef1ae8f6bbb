package belay

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

const refundForm = `{"type":"object","properties":{"method":{"type":"string","enum":["card","store_credit"]}},"required":["method"]}`

// A call that asks, is lost after the answer came (a dropped connection,
// a worker gone), and is made again asks the same question again: it gets
// the answer given, and nobody is asked twice.
func TestElicitAskedAgainFindsItsWait(t *testing.T) {
	st := openStore(t)
	var attempts atomic.Int32
	heard := make(chan ElicitAnswer, 4)
	how := Tool{Name: "refund_how", Effect: Read, InputSchema: json.RawMessage(`{"type":"object"}`), Timeout: 20 * time.Second,
		Retry: RetryPolicy{MaxAttempts: 3, BaseDelay: time.Millisecond},
		Call: func(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
			a, err := Elicit(ctx, Elicitation{Message: "Card or store credit?", Schema: json.RawMessage(refundForm)})
			if err != nil {
				return nil, err
			}
			heard <- a
			if attempts.Add(1) == 1 {
				return nil, Transient(errors.New("connection lost after the answer"))
			}
			return json.Marshal(a)
		}}
	agent := answerAgent(scripted.Call{Name: "refund_how", Args: map[string]any{}}, func(a *Agent) { a.Tools = []Tool{how} })
	rt := newRuntime(t, st, nil, agent)
	ctx := t.Context()
	run, _, err := rt.StartRun(ctx, RunRequest{Agent: "a", Tenant: "acme", User: "ada", Input: "refund"})
	if err != nil {
		t.Fatal(err)
	}
	drained := make(chan error, 1)
	go func() { drained <- rt.Drain(ctx) }()
	var w store.Wait
	for deadline := time.Now().Add(20 * time.Second); ; {
		ws, err := rt.Operator().PendingWaits(ctx, AnyTenant)
		if err != nil {
			t.Fatal(err)
		}
		if len(ws) > 0 {
			w = ws[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no question within 20 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := rt.Operator().PostResult(ctx, "acme", run.ID, w.ToolUseID, Result{Value: json.RawMessage(`{"method":"store_credit"}`), By: "human:bo"}); err != nil {
		t.Fatal(err)
	}
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	if n := attempts.Load(); n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
	for range 2 {
		if a := <-heard; a.Action != ElicitAccept || !strings.Contains(string(a.Content), `"store_credit"`) {
			t.Errorf("an attempt heard %+v, want accept with store_credit", a)
		}
	}
	ws, err := st.Waits(ctx, store.ListWaitsParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(ws) != 1 {
		t.Errorf("%d waits, want the one question, asked once", len(ws))
	}
	got, err := st.GetRun(ctx, AnyTenant, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusDone || !strings.Contains(got.Final, "store_credit") {
		t.Errorf("run %s with %q, want done with the answer", got.Status, got.Final)
	}
}

// Outside a call of a run, nothing can be asked.
func TestElicitOutsideACall(t *testing.T) {
	if _, err := Elicit(t.Context(), Elicitation{Message: "?"}); !errors.Is(err, ErrNotInCall) {
		t.Errorf("Elicit outside a call: %v, want ErrNotInCall", err)
	}
}

// The answers a form takes, and the errors of those it refuses.
func TestElicitAnswerOf(t *testing.T) {
	p := elicitPrompt{Question: "How?", Elicitation: elicitForm{Tool: "refund_how", Schema: json.RawMessage(refundForm)}}
	for _, tc := range []struct {
		value, text, want, wrong string
	}{
		{value: `{"method":"card"}`, want: `{"action":"accept","content":{"method":"card"}}`},
		{value: `"card"`, want: `{"action":"accept","content":{"method":"card"}}`},
		{text: "store_credit", want: `{"action":"accept","content":{"method":"store_credit"}}`},
		{value: `{"action":"decline","content":{"method":"card"}}`, want: `{"action":"decline"}`},
		{value: `{"action":"cancel"}`, want: `{"action":"cancel"}`},
		{value: `{"method":"cash"}`, wrong: "card, store_credit"},
		{value: `{}`, wrong: "method"},
		{value: `{"action":"maybe"}`, wrong: `action "maybe"`},
		{value: `{"action":"accept","content":{"method":"gold"}}`, wrong: "enum"},
	} {
		got, err := elicitAnswerOf(p, json.RawMessage(tc.value), tc.text)
		switch {
		case tc.wrong != "":
			if !errors.Is(err, ErrWrongAnswer) || !strings.Contains(err.Error(), tc.wrong) {
				t.Errorf("%s%s: %v, want ErrWrongAnswer saying %q", tc.value, tc.text, err, tc.wrong)
			}
		case err != nil:
			t.Errorf("%s%s: %v", tc.value, tc.text, err)
		case string(got) != tc.want:
			t.Errorf("%s%s: %s, want %s", tc.value, tc.text, got, tc.want)
		}
	}
	two := elicitPrompt{Elicitation: elicitForm{Tool: "t", Schema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"number"}}}`)}}
	if _, err := elicitAnswerOf(two, nil, "just text"); !errors.Is(err, ErrWrongAnswer) || !strings.Contains(err.Error(), "JSON object") {
		t.Errorf("text for a form of two fields: %v, want ErrWrongAnswer asking for a JSON object", err)
	}
}
