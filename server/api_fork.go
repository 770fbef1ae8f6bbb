package server

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/belayrun/belay"
)

// forkRequest is the body of POST /v1/runs/{id}/fork.
type forkRequest struct {
	AtStep  *int   `json:"at_step"`
	Message string `json:"message"`
	Append  bool   `json:"append"`
	Reason  string `json:"reason"`
}

// forkRun makes a fork of a run of the key's tenant: a new queued run with
// the run's history up to a step, which repeats none of its side effects
// (belay.Operator.Fork). The key's identity is recorded as who forked, and
// may not approve the fork's actions.
func (s *Server) forkRun(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req forkRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	switch {
	case req.AtStep == nil:
		return errBadRequest("invalid_field", "at_step is required: the run's step the fork's history ends at (0 for the customer's message alone)")
	case len(req.Message) > 64<<10:
		return errBadRequest("invalid_field", "message is at most 64 KiB")
	case req.Append && strings.TrimSpace(req.Message) == "":
		return errBadRequest("invalid_field", "append adds message: give a message")
	case len(req.Reason) > 2000:
		return errBadRequest("invalid_field", "reason is at most 2000 bytes")
	}
	parent, err := s.st.GetRun(r.Context(), p.Tenant, r.PathValue("id"))
	if err != nil {
		return err
	}
	if *req.AtStep < 0 || *req.AtStep > parent.Step {
		return errBadRequest("invalid_field", "at_step must be from 0 to %d, the steps run %s has completed", parent.Step, parent.ID)
	}
	fork, err := s.rt.Operator().Fork(r.Context(), parent.ID, belay.ForkOptions{Tenant: p.Tenant, AtStep: *req.AtStep,
		Message: strings.TrimSpace(req.Message), AppendMessage: req.Append, By: p.Identity(), Reason: req.Reason})
	if err != nil {
		return fmt.Errorf("fork run %s: %w", parent.ID, err)
	}
	writeJSON(w, http.StatusCreated, s.runView(fork))
	return nil
}
