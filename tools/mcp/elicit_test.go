package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

var refundForm = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"method": map[string]any{"type": "string", "enum": []any{"card", "store_credit"}},
	},
	"required": []any{"method"},
}

// askingServer serves one tool, refund_how, that asks how to refund during
// its call and reports what it was told; heard receives each answer.
func askingServer(t *testing.T) (url string, heard chan *mcpsdk.ElicitResult) {
	t.Helper()
	heard = make(chan *mcpsdk.ElicitResult, 4)
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "asking", Version: "1"}, nil)
	s.AddTool(&mcpsdk.Tool{Name: "refund_how", Description: "Ask the customer how to refund.", InputSchema: objectSchema,
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			res, err := req.Session.Elicit(ctx, &mcpsdk.ElicitParams{Message: "Refund to your card or as store credit?", RequestedSchema: refundForm})
			if err != nil {
				return &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "elicit: " + err.Error()}}}, nil
			}
			heard <- res
			method, _ := res.Content["method"].(string)
			return &mcpsdk.CallToolResult{StructuredContent: map[string]any{"action": res.Action, "method": method}}, nil
		})
	h := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s }, nil)
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		hs.Close()
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
	})
	return hs.URL, heard
}

// askingRun starts a run whose model calls refund_how, then ends, with the
// runtime working in the background; it returns once the run waits for the
// answer to the server's question, with that wait.
func askingRun(t *testing.T, timeout time.Duration, elicitations *belay.Elicitations) (*belay.Runtime, store.Store, store.Run, store.Wait, chan *mcpsdk.ElicitResult, <-chan error) {
	t.Helper()
	ctx := t.Context()
	url, heard := askingServer(t)
	c := connect(t, Server{Name: "asking", URL: url, Tools: map[string]ToolConfig{"refund_how": {Timeout: timeout, Elicits: true}}})
	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "belay.db"), sqlite.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	agent := &belay.Agent{Name: "shop", Instructions: "Refund.", Tools: tools, Elicitations: elicitations,
		Model: scripted.New(
			scripted.Reply{Calls: []scripted.Call{{Name: "refund_how", Args: map[string]any{}}}},
			scripted.Reply{Text: "Noted."},
		)}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{agent}})
	if err != nil {
		t.Fatal(err)
	}
	run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "shop", User: "ada", ClientRequestID: "r-1", Input: "Refund A-1."})
	if err != nil {
		t.Fatal(err)
	}
	drained := make(chan error, 1)
	go func() { drained <- rt.Drain(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		waits, err := rt.Operator().PendingWaits(ctx, belay.AnyTenant)
		if err != nil {
			t.Fatal(err)
		}
		if len(waits) == 1 {
			return rt, st, run, waits[0], heard, drained
		}
		if len(waits) > 1 {
			t.Fatalf("%d waits pending, want one", len(waits))
		}
		if time.Now().After(deadline) {
			t.Fatal("no wait for the server's question within 20 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitDone waits for the background runtime to finish the run, and
// checks it is done.
func awaitDone(t *testing.T, st store.Store, run store.Run, drained <-chan error) store.Run {
	t.Helper()
	select {
	case err := <-drained:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not finish within 30 s")
	}
	got, err := st.GetRun(t.Context(), "", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusDone {
		t.Fatalf("run %s, want done", got.Status)
	}
	return got
}

// A server's question during a call is a wait a person answers; an answer
// that does not fit the form is refused and says why, and the answer that
// fits reaches the server, whose call then completes.
func TestElicitationAnsweredByAPerson(t *testing.T) {
	t.Parallel()
	rt, st, run, w, heard, drained := askingRun(t, 20*time.Second, nil)
	if w.Kind != store.WaitPerson || w.Name != "refund_how" || w.RunID != run.ID || w.Status != store.WaitPending {
		t.Fatalf("wait %+v: want a pending question to a person, of refund_how, for run %s", w, run.ID)
	}
	if !strings.Contains(string(w.Prompt), "Refund to your card or as store credit?") {
		t.Errorf("prompt %s does not hold the server's question", w.Prompt)
	}
	got, err := st.GetRun(t.Context(), "", run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.StatusRunning {
		t.Errorf("run %s while its call waits, want running (the call holds its lease)", got.Status)
	}
	op := rt.Operator()
	_, err = op.PostResult(t.Context(), "", run.ID, w.ToolUseID, belay.Result{Value: json.RawMessage(`{"method":"cash"}`), By: "human:bo"})
	if !errors.Is(err, belay.ErrWrongAnswer) || !strings.Contains(err.Error(), "card, store_credit") {
		t.Fatalf("answer cash: %v; want ErrWrongAnswer naming the choices card, store_credit", err)
	}
	_, err = op.PostResult(t.Context(), "", run.ID, w.ToolUseID, belay.Result{Value: json.RawMessage(`{"method":"card"}`),
		By: "human:bo", Roles: []store.Role{store.RoleOperator}})
	if !errors.Is(err, belay.ErrNotYourQuestion) {
		t.Fatalf("answer by an operator: %v; want ErrNotYourQuestion (the question is for an approver)", err)
	}
	if _, err := op.PostResult(t.Context(), "", run.ID, w.ToolUseID, belay.Result{Value: json.RawMessage(`"card"`), By: "human:bo"}); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-heard:
		if res.Action != "accept" || res.Content["method"] != "card" {
			t.Errorf("the server heard %+v, want accept with method card", res)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the server heard no answer within 20 s")
	}
	awaitDone(t, st, run, drained)
	msgs, err := st.Messages(t.Context(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if all := messagesText(msgs); !strings.Contains(all, `\"method\":\"card\"`) {
		t.Errorf("the model did not read the call's result with the answer: %s", all)
	}
	if len(heard) != 0 {
		t.Errorf("the server heard %d more answers, want one in all", len(heard))
	}
}

// A person who declines is heard as declining.
func TestElicitationDeclined(t *testing.T) {
	t.Parallel()
	rt, st, run, w, heard, drained := askingRun(t, 20*time.Second, nil)
	if _, err := rt.Operator().PostResult(t.Context(), "", run.ID, w.ToolUseID,
		belay.Result{Value: json.RawMessage(`{"action":"decline"}`), By: "human:bo"}); err != nil {
		t.Fatal(err)
	}
	if res := <-heard; res.Action != "decline" || len(res.Content) != 0 {
		t.Errorf("the server heard %+v, want decline", res)
	}
	awaitDone(t, st, run, drained)
}

// A question nobody answers expires before the call's timeout: the server
// hears cancel, the call completes, and an answer that comes later is
// refused as late.
func TestElicitationExpires(t *testing.T) {
	t.Parallel()
	rt, st, run, w, heard, drained := askingRun(t, 3*time.Second, nil)
	if w.ExpiresAt.After(time.Now().Add(3 * time.Second)) {
		t.Errorf("the question expires at %s, after the call's timeout", w.ExpiresAt)
	}
	select {
	case res := <-heard:
		if res.Action != "cancel" {
			t.Errorf("the server heard %+v, want cancel", res)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the server heard nothing within 20 s")
	}
	awaitDone(t, st, run, drained)
	_, err := rt.Operator().PostResult(t.Context(), "", run.ID, w.ToolUseID, belay.Result{Value: json.RawMessage(`"card"`), By: "human:bo"})
	// The run has ended by now, which is what the refusal may say.
	if !errors.Is(err, store.ErrWaitExpired) && !errors.Is(err, store.ErrNotWaiting) {
		t.Errorf("a late answer: %v, want ErrWaitExpired or ErrNotWaiting", err)
	}
	waits, err := st.(store.Waiter).Waits(t.Context(), store.ListWaitsParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(waits) != 1 || waits[0].Status == store.WaitAnswered {
		t.Errorf("waits %+v: want the one question, unanswered", waits)
	}
}

// An agent that sends its tools' questions to its user gets the answer
// from the user's reply, which is read against the form.
func TestElicitationAnsweredByTheUser(t *testing.T) {
	t.Parallel()
	rt, st, run, w, heard, drained := askingRun(t, 20*time.Second, &belay.Elicitations{User: true})
	if w.Kind != store.WaitInput {
		t.Fatalf("wait of kind %s, want input (the user's)", w.Kind)
	}
	op := rt.Operator()
	if _, err := op.Say(t.Context(), "", run.ID, belay.Reply{Text: "cash please"}); !errors.Is(err, belay.ErrWrongAnswer) {
		t.Fatalf("reply cash: %v, want ErrWrongAnswer", err)
	}
	if _, err := op.Say(t.Context(), "", run.ID, belay.Reply{Text: "store_credit"}); err != nil {
		t.Fatal(err)
	}
	if res := <-heard; res.Action != "accept" || res.Content["method"] != "store_credit" {
		t.Errorf("the server heard %+v, want accept with method store_credit", res)
	}
	awaitDone(t, st, run, drained)
}

func messagesText(msgs []store.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.Write(m.Content)
		b.WriteByte('\n')
	}
	return b.String()
}
