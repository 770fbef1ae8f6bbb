package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// The answer to a call that waits: a person's answer to an ask_person
// question, or a deferred tool's result posted by another system: POST
// /v1/runs/{id}/results/{call}, the call named by its tool_use id.

type resultRequest struct {
	Result  json.RawMessage `json:"result"`
	IsError bool            `json:"is_error,omitempty"`
	Binding string          `json:"binding,omitempty"`
}

// resultView is the wait a result answered.
type resultView struct {
	RunID      string         `json:"run_id"`
	CallID     string         `json:"call_id"`
	WaitID     string         `json:"wait_id"`
	Kind       store.WaitKind `json:"kind"`
	AnsweredBy string         `json:"answered_by"`
	AnsweredAt time.Time      `json:"answered_at"`
	Repeated   bool           `json:"repeated"`
}

var resultRefusal = answerRefusal{what: "result",
	notWaiting: "the call waits for no such result: ", expired: "the call stopped waiting before this result came: "}

func (s *Server) postResult(w http.ResponseWriter, r *http.Request, p Principal) error {
	key, err := optionalIdempotencyKey(r)
	if err != nil {
		return err
	}
	var req resultRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if len(req.Result) == 0 || string(req.Result) == "null" {
		return errBadRequest("invalid_field", "result is required: a person's answer as a string, or the call's result as JSON")
	}
	said, err := s.rt.Operator().PostResult(r.Context(), p.Tenant, r.PathValue("id"), r.PathValue("call"), belay.Result{
		Value: req.Result, IsError: req.IsError, By: p.Identity(), Roles: p.Roles, Binding: req.Binding, Key: key})
	if err != nil {
		return resultError(err)
	}
	replayed(w, said.Repeated)
	writeJSON(w, http.StatusOK, resultView{RunID: said.Wait.RunID, CallID: said.Wait.ToolUseID, WaitID: said.Wait.ID, Kind: said.Wait.Kind,
		AnsweredBy: said.Wait.AnsweredBy, AnsweredAt: said.Wait.AnsweredAt.UTC(), Repeated: said.Repeated})
	return nil
}

// resultError is the API's error for a refused result; the console's
// answer form shows the same words.
func resultError(err error) error {
	switch {
	case errors.Is(err, belay.ErrWrongAnswer):
		return errBadRequest("invalid_field", "%s", strings.TrimPrefix(err.Error(), "post result: "))
	case errors.Is(err, belay.ErrNotYourQuestion):
		return &apiError{status: http.StatusForbidden, Code: "forbidden", Message: strings.TrimPrefix(err.Error(), "post result: ")}
	}
	return resultRefusal.apiError(err)
}
