package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// waitingAgents wait for an event, ask a person, and call a deferred tool;
// each says the result it got.
func waitingAgents() []*belay.Agent {
	sayResult := func(call scripted.Call) *scripted.Model {
		return scripted.Func(func(req model.Request) (scripted.Reply, error) {
			for _, b := range req.Messages[len(req.Messages)-1].Content {
				if b.Type == model.TypeToolResult {
					return scripted.Reply{Text: "got: " + b.Content}, nil
				}
			}
			return scripted.Reply{Calls: []scripted.Call{call}}, nil
		})
	}
	check := belay.Tool{Name: "credit_check", Deferred: &belay.Deferred{},
		Call: func(context.Context, json.RawMessage) (json.RawMessage, error) { return nil, nil }}
	return []*belay.Agent{
		{Name: "settling", Events: &belay.Events{}, Model: sayResult(scripted.Call{Name: belay.WaitForEventTool,
			Args: map[string]string{"name": "payment_settled"}})},
		{Name: "desk", People: &belay.People{}, Model: sayResult(scripted.Call{Name: belay.AskPersonTool,
			Args: map[string]any{"question": "Make an exception?", "choices": []string{"yes", "no"}}})},
		{Name: "checking", Tools: []belay.Tool{check}, Model: sayResult(scripted.Call{Name: "credit_check",
			Args: map[string]string{"customer": "ada"}})},
	}
}

// waitingStore holds one run of each waiting agent, each waiting, and the
// call each waits on.
func waitingStore(t *testing.T) (db string, runs, calls map[string]string) {
	t.Helper()
	ctx := t.Context()
	db = filepath.Join(t.TempDir(), "belay.db")
	st, err := openStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rt, err := belay.New(belay.Config{Store: st, Agents: waitingAgents()})
	if err != nil {
		t.Fatal(err)
	}
	runs, calls = map[string]string{}, map[string]string{}
	for _, a := range []string{"settling", "desk", "checking"} {
		run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: a, Tenant: "acme", User: "ada", Input: "go"})
		if err != nil {
			t.Fatal(err)
		}
		runs[a] = run.ID
	}
	if err := rt.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	for a, id := range runs {
		ws, err := st.Waits(ctx, store.ListWaitsParams{RunID: id})
		if err != nil || len(ws) != 1 {
			t.Fatalf("waits of the %s run: %+v, %v", a, ws, err)
		}
		calls[a] = ws[0].ToolUseID
	}
	return db, runs, calls
}

// finalOf drains the store with the waiting agents and returns a run's
// status and final answer.
func finalOf(t *testing.T, db, runID string) (store.Status, string) {
	t.Helper()
	st, err := openStore(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := drainExcept(t.Context(), st, waitingAgents()); err != nil {
		t.Fatal(err)
	}
	r, err := st.GetRun(t.Context(), "", runID)
	if err != nil {
		t.Fatal(err)
	}
	return r.Status, r.Final
}

func belayRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(t.Context(), args, &out, &errb)
	return out.String(), err
}

func TestSignalCommand(t *testing.T) {
	db, runs, _ := waitingStore(t)
	id := runs["settling"]
	if _, err := belayRun(t, "signal", id, "payment_settled", "--payload", "{bad", "--db", db); exitCode(err) != 2 || !strings.Contains(err.Error(), "not JSON") {
		t.Errorf("a payload that is not JSON: %v (exit %d), want exit 2 saying so", err, exitCode(err))
	}
	if _, err := belayRun(t, "signal", id, "no spaces allowed", "--db", db); exitCode(err) != 2 || !strings.Contains(err.Error(), "letters, digits") {
		t.Errorf("a bad name: %v (exit %d), want exit 2 saying what a name is", err, exitCode(err))
	}
	if _, err := belayRun(t, "signal", id, "--db", db); exitCode(err) != 2 {
		t.Errorf("no name: %v (exit %d), want exit 2", err, exitCode(err))
	}
	if _, err := belayRun(t, "signal", id, "payment_settled", "--nope", "--db", db); exitCode(err) != 2 {
		t.Errorf("an unknown flag: exit %d, want 2", exitCode(err))
	}
	out, err := belayRun(t, "signal", id, "payment_settled", "--payload", `{"charge":"CH-2"}`, "--key", "ev-1", "--db", db)
	if err != nil || !strings.Contains(out, "sent payment_settled to run "+id+", which waited for it") {
		t.Fatalf("the event: %v\n%s", err, out)
	}
	out, err = belayRun(t, "signal", id, "payment_settled", "--payload", `{"charge":"CH-2"}`, "--key", "ev-1", "--db", db)
	if err != nil || !strings.Contains(out, "nothing changed") {
		t.Errorf("the event again under its key: %v\n%s", err, out)
	}
	if status, final := finalOf(t, db, id); status != store.StatusDone || final != `got: {"charge":"CH-2"}` {
		t.Errorf("after the event the run is %s with %q", status, final)
	}
	if _, err := belayRun(t, "signal", id, "payment_settled", "--db", db); err == nil || exitCode(err) != 1 || !strings.Contains(err.Error(), "belay show "+id) {
		t.Errorf("an event to a done run: %v (exit %d), want it refused saying how to look", err, exitCode(err))
	}
}

func TestAnswerCommand(t *testing.T) {
	db, runs, calls := waitingStore(t)
	desk, check := runs["desk"], runs["checking"]
	if _, err := belayRun(t, "answer", desk, calls["desk"], "maybe", "--db", db); err == nil || !strings.Contains(err.Error(), "not among the choices") {
		t.Errorf("an answer not among the choices: %v", err)
	}
	if _, err := belayRun(t, "answer", desk, calls["desk"], "yes", "--is-error", "--db", db); exitCode(err) != 2 {
		t.Errorf("--is-error on a question: exit %d, want 2", exitCode(err))
	}
	if _, err := belayRun(t, "answer", desk, "toolu_nope", "yes", "--db", db); err == nil || !strings.Contains(err.Error(), "no call toolu_nope") {
		t.Errorf("an unknown call: %v", err)
	}
	if _, err := belayRun(t, "answer", desk, calls["desk"], "--db", db); exitCode(err) != 2 {
		t.Errorf("no answer: exit %d, want 2", exitCode(err))
	}
	if _, err := belayRun(t, "answer", runs["settling"], calls["settling"], "{}", "--db", db); exitCode(err) != 2 || !strings.Contains(err.Error(), "belay signal") {
		t.Errorf("an answer to an event wait: %v, want exit 2 pointing to belay signal", err)
	}
	out, err := belayRun(t, "answer", desk, calls["desk"], "yes", "--key", "a-1", "--as", "human:maya", "--json", "--db", db)
	var got map[string]any
	if err != nil || json.Unmarshal([]byte(out), &got) != nil || got["kind"] != "person" || got["answered_by"] != "human:maya" || got["repeated"] != false {
		t.Fatalf("the answer: %v\n%s", err, out)
	}
	out, err = belayRun(t, "answer", desk, calls["desk"], "yes", "--key", "a-1", "--db", db)
	if err != nil || !strings.Contains(out, "nothing changed") {
		t.Errorf("the answer again under its key: %v\n%s", err, out)
	}
	if status, final := finalOf(t, db, desk); status != store.StatusDone || final != "got: yes" {
		t.Errorf("after the answer the run is %s with %q", status, final)
	}

	if _, err := belayRun(t, "answer", check, calls["checking"], "approved", "--db", db); exitCode(err) != 2 || !strings.Contains(err.Error(), "as JSON") {
		t.Errorf("a deferred result that is not JSON: %v (exit %d), want exit 2", err, exitCode(err))
	}
	// A canceled run's call takes no result.
	st, err := openStore(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := belay.NewOperator(st).Cancel(t.Context(), "acme", check, "human:ops", "withdrawn"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := belayRun(t, "answer", check, calls["checking"], `{"score": 700}`, "--db", db); err == nil || !strings.Contains(err.Error(), "the run was canceled") {
		t.Errorf("a result for a canceled run: %v", err)
	}
}
