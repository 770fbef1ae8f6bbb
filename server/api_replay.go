package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/policy"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

// maxReplayRuns bounds the runs one replay request replays: each is run
// again on the model, while the request waits.
const maxReplayRuns = 50

// replayRequest is the body of POST /v1/replays and the console's replay
// form.
type replayRequest struct {
	Agent string `json:"agent"`
	// Runs are ids of recorded runs; without them Status, Since and Limit
	// select the newest runs of the agent.
	Runs   []string     `json:"runs,omitempty"`
	Status store.Status `json:"status,omitempty"`
	Since  time.Time    `json:"since,omitzero"`
	Limit  int          `json:"limit,omitempty"`
	// Model is "primary" (the default) or "fallback": the agent's fallback
	// model, tested on recorded traffic before it answers real turns.
	Model string `json:"model,omitempty"`
	// Version names the version the replays run as; default the agent's.
	Version string `json:"version,omitempty"`
	// Policy is a policy file (YAML or JSON) the replays are decided by
	// instead of the agent's policy.
	Policy string `json:"policy,omitempty"`
}

// replayView is the answer of POST /v1/replays.
type replayView struct {
	Agent   string               `json:"agent"`
	Version string               `json:"version"`
	Model   string               `json:"model"`
	Policy  string               `json:"policy"`
	Runs    []belay.ReplayResult `json:"runs"`
	Total   belay.ReplaySummary  `json:"total"`
}

// replay runs recorded runs of the key's tenant again in a sandbox and
// compares each with its recording (belay.Replay). It changes nothing: the
// sandbox is a store of its own, removed when the request ends, and no side
// effect is executed. Asking again replays again.
func (s *Server) replay(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req replayRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	v, err := s.replayRuns(r.Context(), p.Tenant, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// replayRuns checks req, reads the runs it names in tenant, and replays
// them.
func (s *Server) replayRuns(ctx context.Context, tenant string, req replayRequest) (replayView, error) {
	switch {
	case req.Agent == "":
		return replayView{}, errBadRequest("invalid_field", "agent is required: the served agent whose recorded runs are replayed")
	case len(req.Runs) > maxReplayRuns:
		return replayView{}, errBadRequest("invalid_field", "runs names at most %d runs; replay more in several requests", maxReplayRuns)
	case req.Limit < 0 || req.Limit > maxReplayRuns:
		return replayView{}, errBadRequest("invalid_field", "limit is from 1 to %d (default 20); replay more in several requests", maxReplayRuns)
	case req.Status != "" && !slices.Contains(statuses, req.Status):
		return replayView{}, errBadRequest("invalid_field", "status %q is not a run status; want one of %v", req.Status, statuses)
	case req.Model != "" && req.Model != "primary" && req.Model != "fallback":
		return replayView{}, errBadRequest("invalid_field", "model is primary (the agent's model, the default) or fallback (its fallback model)")
	case len(req.Version) > 200 || !utf8.ValidString(req.Version):
		return replayView{}, errBadRequest("invalid_field", "version is UTF-8 text of at most 200 bytes")
	case len(req.Policy) > 256<<10:
		return replayView{}, errBadRequest("invalid_field", "policy is a policy file of at most 256 KiB")
	}
	served, ok := s.rt.Agent(req.Agent)
	if !ok {
		return replayView{}, &apiError{status: http.StatusUnprocessableEntity, Code: "unknown_agent",
			Message: fmt.Sprintf("no agent named %q is served here; a replay runs an agent this server serves", req.Agent)}
	}
	agent := *served
	v := replayView{Agent: agent.Name, Version: agent.Version, Model: "primary", Policy: agent.PolicyVersion}
	if req.Model == "fallback" {
		if agent.Fallback == nil {
			return replayView{}, errBadRequest("invalid_field", "agent %q has no fallback model; replay it on its primary model", agent.Name)
		}
		agent.Model, agent.Fallback, v.Model = agent.Fallback, nil, "fallback"
	}
	if req.Version != "" {
		agent.Version, v.Version = req.Version, req.Version
	}
	if req.Policy != "" {
		f, err := policy.Parse("policy", []byte(req.Policy))
		if err != nil {
			return replayView{}, errBadRequest("invalid_field", "policy: %v", err)
		}
		agent.Policy, agent.PolicyVersion, v.Policy = f.Policy(), f.Version(), f.Version()
	}
	runs, err := s.recordedRuns(ctx, tenant, req)
	if err != nil {
		return replayView{}, err
	}
	dir, err := os.MkdirTemp("", "belay-replay-")
	if err != nil {
		return replayView{}, fmt.Errorf("replay sandbox: %w", err)
	}
	defer os.RemoveAll(dir)
	sandbox, err := sqlite.Open(ctx, filepath.Join(dir, "sandbox.db"), sqlite.Config{})
	if err != nil {
		return replayView{}, fmt.Errorf("replay sandbox: %w", err)
	}
	defer sandbox.Close()
	results, err := belay.Replay(ctx, s.st, runs, belay.ReplayOptions{Agent: &agent, Sandbox: sandbox})
	if err != nil {
		return replayView{}, err
	}
	if results == nil {
		results = []belay.ReplayResult{}
	}
	v.Runs, v.Total = results, belay.SummarizeReplays(results)
	return v, nil
}

// recordedRuns reads the runs req names: its ids, each a run of the agent
// in tenant, or the newest runs of the agent its filters keep.
func (s *Server) recordedRuns(ctx context.Context, tenant string, req replayRequest) ([]store.Run, error) {
	if len(req.Runs) == 0 {
		limit := req.Limit
		if limit == 0 {
			limit = 20
		}
		return s.st.ListRuns(ctx, store.ListRunsParams{Tenant: tenant, Agent: req.Agent, Status: req.Status,
			Since: req.Since, Limit: limit, Newest: true})
	}
	runs := make([]store.Run, 0, len(req.Runs))
	for _, id := range req.Runs {
		run, err := s.st.GetRun(ctx, tenant, id)
		if err != nil {
			return nil, err
		}
		if run.Agent != req.Agent {
			return nil, errBadRequest("invalid_field", "run %s is a run of agent %q, not of %q: replay each agent's runs on their own", id, run.Agent, req.Agent)
		}
		runs = append(runs, run)
	}
	return runs, nil
}
