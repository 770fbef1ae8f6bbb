package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// The run page's card of waits: what the run waits for from outside it (a
// reply, an event, a person's answer, a result), or waited for, with who
// answered; and the questions a person answers on the console.

type waitView struct {
	Kind   store.WaitKind
	Status store.WaitStatus
	// Says is what the run waits for, in words.
	Says    string
	CallID  string
	Expires time.Time
	By      string
}

// waitViews are the run's waits, and the cards of its pending questions
// p may answer.
func (s *Server) waitViews(ctx context.Context, p Principal, run store.Run) ([]waitView, []questionCard, error) {
	ws, ok := s.st.(store.Waiter)
	if !ok {
		return nil, nil, nil
	}
	waits, err := ws.Waits(ctx, store.ListWaitsParams{Tenant: run.Tenant, RunID: run.ID})
	if err != nil {
		return nil, nil, err
	}
	var out []waitView
	for _, w := range waits {
		out = append(out, waitView{Kind: w.Kind, Status: w.Status, Says: waitSays(w), CallID: w.ToolUseID, Expires: w.ExpiresAt, By: w.AnsweredBy})
	}
	cards, err := questionCards(p, waits, func(string) (store.Run, error) { return run, nil })
	return out, cards, err
}

// waitSays says what a wait is for, from what the run asked.
func waitSays(w store.Wait) string {
	var p struct {
		Question string `json:"question"`
		Name     string `json:"name"`
		Role     string `json:"role"`
	}
	_ = json.Unmarshal(w.Prompt, &p)
	switch w.Kind {
	case store.WaitInput:
		return "Asked the user: " + p.Question
	case store.WaitPerson:
		return "Asked a person (" + p.Role + "): " + p.Question
	case store.WaitEvent:
		return "Waits for the event " + w.Name
	case store.WaitResult:
		return "Waits for the result of " + w.Name + " from outside"
	}
	return string(w.Kind) + " " + w.Name
}

// questionCard is a pending ask_person question as a person answers it on
// the console: its choices as buttons, or a field for a free answer. The
// form carries the wait's binding, so an answer holds only for the
// question shown.
type questionCard struct {
	WaitID  string
	Run     store.Run
	CallID  string
	Binding string
	Expires time.Time
	question
}

// questionCards are the pending questions of waits that p may answer.
func questionCards(p Principal, waits []store.Wait, runOf func(id string) (store.Run, error)) ([]questionCard, error) {
	var out []questionCard
	for _, w := range waits {
		if w.Status != store.WaitPending || w.Kind != store.WaitPerson || !answerable(p, w) {
			continue
		}
		run, err := runOf(w.RunID)
		if err != nil {
			return nil, err
		}
		out = append(out, questionCard{WaitID: w.ID, Run: run, CallID: w.ToolUseID, Binding: w.Binding, Expires: w.ExpiresAt, question: questionOf(w)})
	}
	return out, nil
}

// maxQuestionCards bounds the questions one page shows.
const maxQuestionCards = 200

func (s *Server) questionsPage(w http.ResponseWriter, r *http.Request, p Principal) (*page, error) {
	var cards []questionCard
	if ws, ok := s.st.(store.Waiter); ok {
		waits, err := ws.Waits(r.Context(), store.ListWaitsParams{Tenant: p.Tenant, Status: store.WaitPending,
			Kinds: []store.WaitKind{store.WaitPerson}, Limit: maxQuestionCards})
		if err != nil {
			return nil, err
		}
		runs := map[string]store.Run{}
		cards, err = questionCards(p, waits, func(id string) (store.Run, error) {
			if run, ok := runs[id]; ok {
				return run, nil
			}
			run, err := s.st.GetRun(r.Context(), p.Tenant, id)
			runs[id] = run
			return run, err
		})
		if err != nil {
			return nil, err
		}
	}
	return &page{Title: "Questions", Nav: "questions", Data: cards}, nil
}

// answerForm takes a person's answer to a question from its card, bound
// to the question shown. A refused answer shows the run's page again with
// why; an answer for a run of another tenant is not found.
func (s *Server) answerForm(w http.ResponseWriter, r *http.Request, p Principal) (*page, error) {
	runID, call := r.PathValue("id"), r.PathValue("call")
	// A form, unlike a JSON body, may carry bytes that are not UTF-8.
	answer := strings.ToValidUTF8(strings.TrimSpace(r.PostFormValue("answer")), "\uFFFD")
	binding := r.PostFormValue("binding")
	var refusal error
	switch {
	case binding == "":
		refusal = errBadRequest("invalid_field", "The form lacks the question's binding; reload the page and answer the question it shows.")
	case answer == "":
		refusal = errBadRequest("invalid_field", "Write an answer, or pick one of the choices.")
	case len(answer) > belay.MaxReplyBytes:
		refusal = errBadRequest("invalid_field", "The answer is longer than %d bytes; shorten it.", belay.MaxReplyBytes)
	default:
		value, _ := json.Marshal(answer)
		_, err := s.rt.Operator().PostResult(r.Context(), p.Tenant, runID, call, belay.Result{Value: value, By: p.Identity(),
			Roles: p.Roles, Binding: binding})
		if err != nil {
			refusal = resultError(err)
		}
	}
	if refusal != nil {
		ae := classify(refusal)
		if ae.status == http.StatusNotFound {
			return nil, refusal
		}
		r.URL.RawQuery = ""
		pg, err := s.runPage(nil, r, p)
		if err != nil {
			return nil, err
		}
		pg.Error = sentence(ae.Message)
		return pg, nil
	}
	http.Redirect(w, r, "/console/runs/"+url.PathEscape(runID)+"?answered="+url.QueryEscape(call), http.StatusSeeOther)
	return nil, nil
}

// sentence begins s with a capital letter.
func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
