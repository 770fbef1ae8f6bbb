package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// What a person can answer: GET /v1/waits lists a tenant's pending
// questions of ask_person and calls of deferred tools, which POST
// /v1/runs/{id}/results/{call} answers; and the refusals every answer to a
// wait shares, a reply, an event or a result.

// answerRefusal words the refusals of an answer to a wait for the API.
type answerRefusal struct {
	// what is the thing sent: reply, event, result.
	what string
	// notWaiting and expired begin the messages of a run that waits for
	// no such thing and of a wait whose time ran out; the store's own
	// words follow.
	notWaiting, expired string
}

// apiError is the API's error for err, or err itself if it is not a
// refusal of the answer.
func (rf answerRefusal) apiError(err error) error {
	switch {
	case errors.Is(err, store.ErrNotWaiting):
		return &apiError{status: http.StatusConflict, Code: "not_waiting", Message: rf.notWaiting + lastClause(err)}
	case errors.Is(err, store.ErrWaitExpired):
		return &apiError{status: http.StatusConflict, Code: "wait_expired", Message: rf.expired + lastClause(err)}
	case errors.Is(err, store.ErrBindingMismatch):
		return &apiError{status: http.StatusConflict, Code: "binding_mismatch",
			Message: "the " + rf.what + "'s binding is not the wait's: the call it was made for has changed; fetch the wait again and answer what it shows"}
	case errors.Is(err, store.ErrAnswerKeyReused):
		return &apiError{status: http.StatusUnprocessableEntity, Code: "idempotency_key_reused",
			Message: "this Idempotency-Key was sent with another " + rf.what + "; use a new key for a new " + rf.what}
	case errors.Is(err, belay.ErrWaitsUnsupported):
		return &apiError{status: http.StatusConflict, Code: "not_waiting", Message: err.Error()}
	}
	return err
}

// replayed marks an answer that repeated an earlier one under its key.
func replayed(w http.ResponseWriter, repeated bool) {
	if repeated {
		w.Header().Set("Idempotent-Replayed", "true")
	}
}

// pendingWaitView is a wait a person can answer.
type pendingWaitView struct {
	ID     string         `json:"id"`
	RunID  string         `json:"run_id"`
	CallID string         `json:"call_id"`
	Kind   store.WaitKind `json:"kind"`
	// Name is the tool that waits: ask_person, or the deferred tool.
	Name string `json:"name"`
	// Question, Choices and Role are an ask_person question's.
	Question string     `json:"question,omitempty"`
	Choices  []string   `json:"choices,omitempty"`
	Role     store.Role `json:"role,omitempty"`
	// Args are a deferred call's arguments, sensitive values redacted.
	Args      json.RawMessage `json:"args,omitempty"`
	Binding   string          `json:"binding"`
	ExpiresAt time.Time       `json:"expires_at"`
	CreatedAt time.Time       `json:"created_at"`
	// Answer is where the answer is posted.
	Answer string `json:"answer"`
}

// question is what an ask_person call asked, as its wait keeps it.
type question struct {
	Question string     `json:"question"`
	Choices  []string   `json:"choices"`
	Role     store.Role `json:"role"`
}

func questionOf(w store.Wait) question {
	var q question
	_ = json.Unmarshal(w.Prompt, &q)
	if q.Role == "" {
		q.Role = store.RoleApprover
	}
	return q
}

// answerable reports whether p may answer w: a question only a person of
// its role, a deferred call's result anyone who may post results.
func answerable(p Principal, w store.Wait) bool {
	switch w.Kind {
	case store.WaitPerson:
		return p.Has(questionOf(w).Role)
	case store.WaitResult:
		return true
	}
	return false
}

func (s *Server) pendingWaitView(w store.Wait, run store.Run) pendingWaitView {
	v := pendingWaitView{ID: w.ID, RunID: w.RunID, CallID: w.ToolUseID, Kind: w.Kind, Name: w.Name, Binding: w.Binding,
		ExpiresAt: w.ExpiresAt.UTC(), CreatedAt: w.CreatedAt.UTC(),
		Answer: "/v1/runs/" + url.PathEscape(w.RunID) + "/results/" + url.PathEscape(w.ToolUseID)}
	if w.Kind == store.WaitPerson {
		q := questionOf(w)
		v.Question, v.Choices, v.Role = q.Question, q.Choices, q.Role
	} else {
		v.Args = s.rt.RedactRunArgs(run, w.Name, w.Prompt)
	}
	return v
}

// answerableKinds are the kinds of waits a person answers through the
// results route.
var answerableKinds = []store.WaitKind{store.WaitPerson, store.WaitResult}

// maxWaitsScanned bounds the waits one page reads to fill itself with
// those the key may answer; past it the page is cut short, and its next
// goes on from where the reading stopped.
const maxWaitsScanned = 5000

func (s *Server) listWaits(w http.ResponseWriter, r *http.Request, p Principal) error {
	q := r.URL.Query()
	for k := range q {
		if !slices.Contains([]string{"kind", "run", "after", "limit"}, k) {
			return errBadRequest("invalid_query", "unknown query parameter %q; filters are kind, run, after, limit", k)
		}
	}
	params := store.ListWaitsParams{Tenant: p.Tenant, RunID: q.Get("run"), Status: store.WaitPending,
		Kinds: answerableKinds, After: q.Get("after")}
	if k := q.Get("kind"); k != "" {
		if !slices.Contains(answerableKinds, store.WaitKind(k)) {
			return errBadRequest("invalid_query", "kind %q: want person (ask_person questions) or result (deferred tools); "+
				"a reply to the user goes to POST /v1/runs/{id}/messages, an event to POST /v1/runs/{id}/signals", k)
		}
		params.Kinds = []store.WaitKind{store.WaitKind(k)}
	}
	limit, err := queryLimit(q, 50, 500)
	if err != nil {
		return err
	}
	page := struct {
		Waits []pendingWaitView `json:"waits"`
		Next  string            `json:"next,omitempty"`
	}{Waits: []pendingWaitView{}}
	ws, ok := s.st.(store.Waiter)
	if !ok {
		writeJSON(w, http.StatusOK, page)
		return nil
	}
	// One more than the page tells whether there is a next page. Waits the
	// key may not answer are not shown, so the store is read until the
	// page is full or nothing is left.
	params.Limit = limit + 1
	var shown []store.Wait
	last, scanned := "", 0
	for len(shown) <= limit {
		batch, err := ws.Waits(r.Context(), params)
		if err != nil {
			return err
		}
		for _, wt := range batch {
			last = wt.ID
			if answerable(p, wt) {
				if shown = append(shown, wt); len(shown) > limit {
					break
				}
			}
		}
		if scanned += len(batch); len(batch) < params.Limit {
			last = "" // the store has no more
			break
		}
		if scanned >= maxWaitsScanned {
			break
		}
		params.After = batch[len(batch)-1].ID
	}
	if len(shown) > limit {
		shown = shown[:limit]
		last = shown[limit-1].ID
	}
	if last != "" {
		page.Next = "/v1/waits?" + nextQuery(q, last)
	}
	runs := map[string]store.Run{}
	for _, wt := range shown {
		run, ok := runs[wt.RunID]
		if !ok {
			if run, err = s.st.GetRun(r.Context(), p.Tenant, wt.RunID); err != nil {
				return err
			}
			runs[wt.RunID] = run
		}
		page.Waits = append(page.Waits, s.pendingWaitView(wt, run))
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}
