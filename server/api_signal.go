package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/belayrun/belay"
)

// Named events sent to a run: POST /v1/runs/{id}/signals. The path is not
// /events, which is the run's trace as Server-Sent Events (GET
// /v1/runs/{id}/events): one path would name two different things, the
// events a run wrote and the events sent to it.

type signalRequest struct {
	Name    string          `json:"name"`
	Payload json.RawMessage `json:"payload,omitempty"`
}

// signalView is what an event sent to a run became.
type signalView struct {
	ID      string          `json:"id"`
	RunID   string          `json:"run_id"`
	Name    string          `json:"name"`
	Payload json.RawMessage `json:"payload"`
	// WaitID is the wait the event answered; empty while the run keeps it
	// for a wait to come.
	WaitID    string    `json:"wait_id,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Repeated  bool      `json:"repeated"`
}

var signalRefusal = answerRefusal{what: "event", notWaiting: "the run takes no more events: "}

func (s *Server) signal(w http.ResponseWriter, r *http.Request, p Principal) error {
	key, err := optionalIdempotencyKey(r)
	if err != nil {
		return err
	}
	var req signalRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if len(bytes.TrimSpace(req.Payload)) > belay.MaxEventPayloadBytes {
		return errBadRequest("invalid_field", "payload is at most %d bytes", belay.MaxEventPayloadBytes)
	}
	sent, err := s.rt.Operator().Signal(r.Context(), p.Tenant, r.PathValue("id"), belay.Event{Name: req.Name, Payload: req.Payload, Key: key})
	switch {
	case errors.Is(err, belay.ErrInvalidEvent):
		return errBadRequest("invalid_field", "%s", strings.TrimPrefix(err.Error(), "signal: "))
	case err != nil:
		return signalRefusal.apiError(err)
	}
	replayed(w, sent.Repeated)
	sig := sent.Signal
	writeJSON(w, http.StatusOK, signalView{ID: sig.ID, RunID: sig.RunID, Name: sig.Name, Payload: sig.Payload,
		WaitID: sig.ConsumedBy, CreatedAt: sig.CreatedAt.UTC(), Repeated: sent.Repeated})
	return nil
}
