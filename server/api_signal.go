package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
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

func (s *Server) signal(w http.ResponseWriter, r *http.Request, p Principal) error {
	key := ""
	if header := r.Header.Get("Idempotency-Key"); header != "" {
		var err error
		if key, err = parseIdempotencyKey(header); err != nil {
			return err
		}
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
	case errors.Is(err, store.ErrNotWaiting):
		return &apiError{status: http.StatusConflict, Code: "not_waiting",
			Message: "the run takes no more events: " + lastClause(err)}
	case errors.Is(err, store.ErrAnswerKeyReused):
		return &apiError{status: http.StatusUnprocessableEntity, Code: "idempotency_key_reused",
			Message: "this Idempotency-Key was sent with another event; use a new key for a new event"}
	case errors.Is(err, belay.ErrWaitsUnsupported):
		return &apiError{status: http.StatusConflict, Code: "not_waiting", Message: err.Error()}
	case err != nil:
		return err
	}
	if sent.Repeated {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	sig := sent.Signal
	writeJSON(w, http.StatusOK, signalView{ID: sig.ID, RunID: sig.RunID, Name: sig.Name, Payload: sig.Payload,
		WaitID: sig.ConsumedBy, CreatedAt: sig.CreatedAt.UTC(), Repeated: sent.Repeated})
	return nil
}
