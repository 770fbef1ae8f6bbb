package server

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// TestConsoleAnswersQuestions: a person answers a run's question on the
// console, bound to the question shown. A tampered binding, a wrong
// answer, an answer to a question answered already, after its expiry or
// to a canceled run changes nothing and says why; another tenant's
// question is not found; a question of another role is not shown.
func TestConsoleAnswersQuestions(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, f *fixture) {
		op := f.key("acme", "ops", store.RoleOperator)
		// signIn sets its jar on the server's one client: each session
		// here keeps a copy of its own.
		signIn := func(key string) *http.Client {
			c := *f.signIn(key)
			return &c
		}
		c := signIn(f.key("acme", "maya", store.RoleApprover))
		ask := func(idem, input string) (store.Run, store.Wait) {
			r := f.start(op, idem, "desk", "ada", input)
			f.drain()
			ws, err := f.st.(store.Waiter).Waits(context.Background(), store.ListWaitsParams{RunID: r.ID})
			if err != nil || len(ws) != 1 {
				t.Fatalf("waits of the desk's run: %+v, %v", ws, err)
			}
			run, err := f.st.GetRun(context.Background(), "acme", r.ID)
			if err != nil {
				t.Fatal(err)
			}
			return run, ws[0]
		}
		run, w := ask("Q-1", "exception?")
		answer := f.http.URL + "/console/runs/" + run.ID + "/results/" + w.ToolUseID
		stillPending := func(what string) {
			t.Helper()
			ws, err := f.st.(store.Waiter).Waits(context.Background(), store.ListWaitsParams{RunID: run.ID})
			if err != nil || len(ws) != 1 || ws[0].Status != store.WaitPending {
				t.Errorf("after %s the wait is %+v, %v; want it pending", what, ws, err)
			}
		}

		status, body := get(t, c, f.http.URL+"/console/questions")
		if status != 200 || !containsAll(body, "Make an exception?", `value="yes"`, `value="no"`, w.Binding, `action="/console/runs/`+run.ID+`/results/`+w.ToolUseID+`"`) {
			t.Fatalf("the questions page: %d\n%s", status, body)
		}
		if _, body := get(t, c, f.http.URL+"/console/runs/"+run.ID); !containsAll(body, "Make an exception?", w.Binding) {
			t.Errorf("the run page has no card of its question")
		}
		if _, body := get(t, signIn(op), f.http.URL+"/console/questions"); strings.Contains(body, "Make an exception?") {
			t.Errorf("an operator is shown an approver's question")
		}

		status, _, body = post(t, c, answer, url.Values{"answer": {"yes"}, "binding": {"forged"}})
		if status != 200 || !strings.Contains(body, "binding is not the wait") {
			t.Errorf("a tampered binding: %d\n%s", status, body)
		}
		stillPending("a tampered binding")
		status, _, body = post(t, c, answer, url.Values{"answer": {"maybe"}, "binding": {w.Binding}})
		if status != 200 || !strings.Contains(body, "not among the choices") {
			t.Errorf("an answer not among the choices: %d", status)
		}
		status, _, body = post(t, c, answer, url.Values{"answer": {" "}, "binding": {w.Binding}})
		if status != 200 || !strings.Contains(body, "Write an answer") {
			t.Errorf("an empty answer: %d", status)
		}
		stillPending("refused answers")
		other := signIn(f.key("globex", "eve", store.RoleApprover, store.RoleOperator))
		if status, _, _ := post(t, other, answer, url.Values{"answer": {"yes"}, "binding": {w.Binding}}); status != http.StatusNotFound {
			t.Errorf("another tenant's answer: %d, want 404", status)
		}
		stillPending("another tenant's answer")

		status, loc, _ := post(t, c, answer, url.Values{"answer": {"yes"}, "binding": {w.Binding}})
		if status != http.StatusSeeOther || loc != "/console/runs/"+run.ID+"?answered="+w.ToolUseID {
			t.Fatalf("the answer: %d to %q", status, loc)
		}
		if _, body := get(t, c, f.http.URL+loc); !strings.Contains(body, "Answer recorded by human:maya") {
			t.Errorf("the run page after the answer does not say it was recorded")
		}
		f.drain()
		if got, _ := f.st.GetRun(context.Background(), "acme", run.ID); got.Status != store.StatusDone || got.Final != "answer: yes" {
			t.Errorf("after the answer the run is %s with %q", got.Status, got.Final)
		}
		status, _, body = post(t, c, answer, url.Values{"answer": {"no"}, "binding": {w.Binding}})
		if status != 200 || !strings.Contains(body, "waits for no such result") {
			t.Errorf("a second answer: %d", status)
		}

		// A question in words takes a free answer.
		free, fw := ask("Q-2", "free: exception?")
		if _, body := get(t, c, f.http.URL+"/console/runs/"+free.ID); !strings.Contains(body, `<textarea name="answer"`) {
			t.Errorf("a question without choices has no field for the answer")
		}
		if status, _, _ := post(t, c, f.http.URL+"/console/runs/"+free.ID+"/results/"+fw.ToolUseID,
			url.Values{"answer": {"only this once"}, "binding": {fw.Binding}}); status != http.StatusSeeOther {
			t.Errorf("a free answer: %d", status)
		}
		f.drain()
		if got, _ := f.st.GetRun(context.Background(), "acme", free.ID); got.Final != "answer: only this once" {
			t.Errorf("after a free answer the run says %q", got.Final)
		}

		// A canceled run's question is closed with it.
		canceled, cw := ask("Q-3", "exception?")
		if _, err := f.rt.Operator().Cancel(context.Background(), "acme", canceled.ID, "human:ops", "withdrawn"); err != nil {
			t.Fatal(err)
		}
		status, _, body = post(t, c, f.http.URL+"/console/runs/"+canceled.ID+"/results/"+cw.ToolUseID,
			url.Values{"answer": {"yes"}, "binding": {cw.Binding}})
		if status != 200 || !strings.Contains(body, "the run was canceled") {
			t.Errorf("an answer to a canceled run: %d", status)
		}

		// Past its expiry a question takes no answer.
		late, lw := ask("Q-4", "exception?")
		if _, err := f.st.(store.Waiter).ExpireDueWaits(context.Background(),
			store.ExpireWaitsParams{Now: time.Now().Add(belay.DefaultPersonTimeout + time.Hour)}); err != nil {
			t.Fatal(err)
		}
		status, _, body = post(t, c, f.http.URL+"/console/runs/"+late.ID+"/results/"+lw.ToolUseID,
			url.Values{"answer": {"yes"}, "binding": {lw.Binding}})
		if status != 200 || !strings.Contains(body, "stopped waiting before this result came") {
			t.Errorf("a late answer: %d", status)
		}
	})
}
