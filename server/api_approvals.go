package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// The approval endpoints: pending and decided approvals, and decisions
// bound to what the approver saw.

type approvalView struct {
	ID            string               `json:"id"`
	RunID         string               `json:"run_id"`
	Step          int                  `json:"step"`
	Tool          string               `json:"tool"`
	Args          json.RawMessage      `json:"args"`
	Summary       string               `json:"summary"`
	Reason        string               `json:"reason"`
	Category      string               `json:"category"`
	PolicyVersion string               `json:"policy_version"`
	Binding       string               `json:"binding"`
	Status        store.ApprovalStatus `json:"status"`
	ExpiresAt     time.Time            `json:"expires_at"`
	CreatedAt     time.Time            `json:"created_at"`
	EditedArgs    json.RawMessage      `json:"edited_args,omitempty"`
	DecidedBy     string               `json:"decided_by,omitempty"`
	DecidedAt     *time.Time           `json:"decided_at,omitempty"`
	Note          string               `json:"note,omitempty"`
	// ParentDid, on an approval of a fork's call, is the equal effect the
	// fork's parent recorded: the parent did this already.
	ParentDid *parentDidView `json:"parent_did,omitempty"`
}

// parentDidView is the effect of a fork's parent that an approval's call
// would repeat. Its result is not shown: the run's effects are read where
// the key's roles allow.
type parentDidView struct {
	RunID string `json:"run_id"`
	Key   string `json:"key"`
	Step  int    `json:"step"`
	State string `json:"state"`
}

// approvalView shows an approval with the secret arguments of its tool
// redacted, by what its run recorded and the tools served here.
func (s *Server) approvalView(a store.Approval, run store.Run) approvalView {
	v := approvalView{ID: a.ID, RunID: a.RunID, Step: a.Step, Tool: a.Tool, Args: s.rt.RedactRunArgs(run, a.Tool, a.Args),
		Summary: a.Summary, Reason: a.Reason, Category: a.Category, PolicyVersion: a.PolicyVersion, Binding: a.Binding,
		Status: a.Status, ExpiresAt: a.ExpiresAt, CreatedAt: a.CreatedAt, DecidedBy: a.DecidedBy, Note: a.Note}
	if len(a.EditedArgs) > 0 {
		v.EditedArgs = s.rt.RedactRunArgs(run, a.Tool, a.EditedArgs)
	}
	if !a.DecidedAt.IsZero() {
		t := a.DecidedAt
		v.DecidedAt = &t
	}
	if pe := a.ParentEffect; pe != nil {
		v.ParentDid = &parentDidView{RunID: pe.RunID, Key: pe.Key, Step: pe.Step, State: string(pe.State)}
	}
	return v
}

// runsOf reads the run of each approval, one read per run.
func (s *Server) runsOf(r *http.Request, tenant string, as []store.Approval) (map[string]store.Run, error) {
	runs := map[string]store.Run{}
	for _, a := range as {
		if _, ok := runs[a.RunID]; ok {
			continue
		}
		run, err := s.st.GetRun(r.Context(), tenant, a.RunID)
		if err != nil {
			return nil, err
		}
		runs[a.RunID] = run
	}
	return runs, nil
}

var approvalStatuses = []store.ApprovalStatus{store.ApprovalPending, store.ApprovalApproved, store.ApprovalEdited,
	store.ApprovalRejected, store.ApprovalExpired}

func (s *Server) listApprovals(w http.ResponseWriter, r *http.Request, p Principal) error {
	q := r.URL.Query()
	for k := range q {
		if !slices.Contains([]string{"status", "run", "limit"}, k) {
			return errBadRequest("invalid_query", "unknown query parameter %q; filters are status, run, limit", k)
		}
	}
	params := store.ListApprovalsParams{Tenant: p.Tenant, RunID: q.Get("run")}
	if st := q.Get("status"); st != "" {
		if !slices.Contains(approvalStatuses, store.ApprovalStatus(st)) {
			return errBadRequest("invalid_query", "status %q: want pending, approved, edited, rejected or expired", st)
		}
		params.Status = store.ApprovalStatus(st)
	}
	limit, err := queryLimit(q, 100, 1000)
	if err != nil {
		return err
	}
	params.Limit = limit
	as, err := s.st.Approvals(r.Context(), params)
	if err != nil {
		return err
	}
	runs, err := s.runsOf(r, p.Tenant, as)
	if err != nil {
		return err
	}
	out := []approvalView{}
	for _, a := range as {
		out = append(out, s.approvalView(a, runs[a.RunID]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"approvals": out})
	return nil
}

func (s *Server) tenantApproval(r *http.Request, p Principal) (store.Approval, store.Run, error) {
	a, err := s.st.GetApproval(r.Context(), p.Tenant, r.PathValue("id"))
	if err != nil {
		return store.Approval{}, store.Run{}, err
	}
	run, err := s.st.GetRun(r.Context(), p.Tenant, a.RunID)
	if err != nil {
		return store.Approval{}, store.Run{}, err
	}
	return a, run, nil
}

func (s *Server) getApproval(w http.ResponseWriter, r *http.Request, p Principal) error {
	a, run, err := s.tenantApproval(r, p)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.approvalView(a, run))
	return nil
}

type decisionRequest struct {
	Decision  string          `json:"decision"`
	Binding   string          `json:"binding"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Note      string          `json:"note,omitempty"`
}

// validate checks a decision before anything is read or written.
func (d decisionRequest) validate() error {
	switch d.Decision {
	case "approve", "reject", "edit":
	default:
		return errBadRequest("invalid_field", "decision must be approve, edit or reject")
	}
	if d.Binding == "" {
		return errBadRequest("invalid_field", "binding is required: copy it from the approval you decide, so the decision holds only for what you saw")
	}
	if len(d.Note) > 2000 {
		return errBadRequest("invalid_field", "note is at most 2000 bytes")
	}
	if d.Decision == "reject" && strings.TrimSpace(d.Note) == "" {
		return errBadRequest("invalid_field", "a rejection needs a note saying why; the agent reads it")
	}
	edit := len(bytes.TrimSpace(d.Arguments)) > 0 && !bytes.Equal(bytes.TrimSpace(d.Arguments), []byte("null"))
	if d.Decision == "edit" && (!edit || bytes.TrimSpace(d.Arguments)[0] != '{') {
		return errBadRequest("invalid_field", `an edit needs arguments: a JSON object of the fields to change, merged into the call's arguments ({"amount_usd": 100}; null removes a field)`)
	}
	if d.Decision != "edit" && edit {
		return errBadRequest("invalid_field", "arguments are only for an edit")
	}
	return nil
}

func (s *Server) decide(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req decisionRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if err := req.validate(); err != nil {
		return err
	}
	a, run, err := s.applyDecision(r, p, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.approvalView(a, run))
	return nil
}

// applyDecision records a decision of the principal on an approval of its
// tenant; the API and the console both decide through it.
func (s *Server) applyDecision(r *http.Request, p Principal, req decisionRequest) (store.Approval, store.Run, error) {
	a, run, err := s.tenantApproval(r, p)
	if err != nil {
		return store.Approval{}, store.Run{}, err
	}
	// Where the tool is not served, an edit cannot be checked against its
	// schema, nor a value shown hidden (a run that recorded no secrets)
	// put back: the call would run with the markers.
	if req.Decision == "edit" && !s.rt.Serves(run.Agent, a.Tool) {
		return store.Approval{}, store.Run{}, &apiError{status: http.StatusUnprocessableEntity, Code: "invalid_arguments",
			Message: fmt.Sprintf("tool %s of agent %s is not served here, so this server cannot check an edit against it; approve or reject it here, or edit it on a server that serves the agent", a.Tool, run.Agent)}
	}
	decided, err := s.rt.Operator().Decide(r.Context(), p.Tenant, a.ID, belay.ApprovalDecision{Choice: belay.ApprovalChoice(req.Decision),
		EditedArgs: req.Arguments, Note: req.Note, By: p.Identity(), Binding: req.Binding})
	if errors.Is(err, belay.ErrInvalidEdit) {
		return store.Approval{}, store.Run{}, &apiError{status: http.StatusUnprocessableEntity, Code: "invalid_arguments",
			Message: strings.TrimPrefix(err.Error(), "decide: ")}
	}
	if err != nil {
		return store.Approval{}, store.Run{}, err
	}
	return decided, run, nil
}

func (s *Server) approvalStats(w http.ResponseWriter, r *http.Request, p Principal) error {
	stats, err := s.rt.Operator().ApprovalStats(r.Context(), p.Tenant)
	if err != nil {
		return err
	}
	if stats == nil {
		stats = []belay.CategoryStats{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"categories": stats})
	return nil
}
