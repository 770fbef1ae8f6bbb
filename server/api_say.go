package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/belayrun/belay"
)

// The user's reply to a run that waits for one: POST /v1/runs/{id}/messages
// answers the question the run asked (ask_user) and queues it.

type sayRequest struct {
	Text string `json:"text"`
}

// sayView is what a reply became.
type sayView struct {
	RunID  string `json:"run_id"`
	WaitID string `json:"wait_id"`
	// Question is what the run asked.
	Question   string    `json:"question"`
	AnsweredBy string    `json:"answered_by"`
	AnsweredAt time.Time `json:"answered_at"`
	// Repeated says the request repeated an earlier one under its
	// Idempotency-Key and changed nothing.
	Repeated bool `json:"repeated"`
}

var sayRefusal = answerRefusal{what: "reply",
	notWaiting: "the run is not waiting for a reply (GET /v1/runs/{id} shows what it is doing): ",
	expired:    "the conversation ended before this reply came (start a new run): "}

func (s *Server) say(w http.ResponseWriter, r *http.Request, p Principal) error {
	key, err := optionalIdempotencyKey(r)
	if err != nil {
		return err
	}
	var req sayRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(req.Text) == "":
		return errBadRequest("invalid_field", "text is required: the user's reply")
	case len(req.Text) > belay.MaxReplyBytes || !utf8.ValidString(req.Text):
		return errBadRequest("invalid_field", "text must be UTF-8 of at most %d bytes", belay.MaxReplyBytes)
	}
	said, err := s.rt.Operator().Say(r.Context(), p.Tenant, r.PathValue("id"), belay.Reply{Text: req.Text, Key: key, By: p.Identity()})
	if errors.Is(err, belay.ErrWrongAnswer) {
		// A question a tool asked takes the form it asked for.
		return errBadRequest("invalid_field", "%s", strings.TrimPrefix(err.Error(), "say: "))
	}
	if err != nil {
		return sayRefusal.apiError(err)
	}
	var question struct {
		Question string `json:"question"`
	}
	_ = json.Unmarshal(said.Wait.Prompt, &question)
	replayed(w, said.Repeated)
	writeJSON(w, http.StatusOK, sayView{RunID: said.Wait.RunID, WaitID: said.Wait.ID, Question: question.Question,
		AnsweredBy: said.Wait.AnsweredBy, AnsweredAt: said.Wait.AnsweredAt.UTC(), Repeated: said.Repeated})
	return nil
}

// optionalIdempotencyKey reads the Idempotency-Key of a request that may
// go without one: "" when it has none.
func optionalIdempotencyKey(r *http.Request) (string, error) {
	header := r.Header.Get("Idempotency-Key")
	if header == "" {
		return "", nil
	}
	return parseIdempotencyKey(header)
}

// lastClause is what the store said of a refused reply: the part of its
// message after the refusal's own words ("run ... is done").
func lastClause(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
}
