package server

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/belayrun/belay/store"
)

// replayForm is what the console's replay page shows: the choices, and the
// comparison once asked for.
type replayForm struct {
	Agents   []string
	Statuses []store.Status
	Request  replayRequest
	// RunIDs is Request.Runs as typed: ids separated by commas or spaces.
	RunIDs string
	Result *replayView
}

// replayPage shows the replay form.
func (s *Server) replayPage(w http.ResponseWriter, r *http.Request, p Principal) (*page, error) {
	agents := s.rt.AgentNames()
	form := replayForm{Agents: agents, Statuses: statuses}
	if len(agents) > 0 {
		form.Request.Agent = agents[0]
	}
	form.Request.Limit = 20
	return &page{Title: "Replay", Nav: "replay", Data: form}, nil
}

// replayFormPost replays the runs the form names (see Server.replay) and shows
// the comparison. It changes nothing: the replays run in a sandbox and
// execute no side effect, so a form sent again replays again.
func (s *Server) replayFormPost(w http.ResponseWriter, r *http.Request, p Principal) (*page, error) {
	form := replayForm{Agents: s.rt.AgentNames(), Statuses: statuses, RunIDs: r.PostFormValue("runs")}
	req := replayRequest{Agent: r.PostFormValue("agent"), Status: store.Status(r.PostFormValue("status")),
		Model: r.PostFormValue("model"), Version: strings.TrimSpace(r.PostFormValue("version")), Policy: r.PostFormValue("policy")}
	req.Runs = strings.FieldsFunc(form.RunIDs, func(c rune) bool { return c == ',' || c == ' ' || c == '\n' || c == '\r' || c == '\t' })
	if limit := strings.TrimSpace(r.PostFormValue("limit")); limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil {
			return nil, errBadRequest("invalid_field", "limit is a number of runs from 1 to %d", maxReplayRuns)
		}
		req.Limit = n
	}
	form.Request = req
	v, err := s.replayRuns(r.Context(), p.Tenant, req)
	pg := &page{Title: "Replay", Nav: "replay", Data: &form}
	if err != nil {
		ae := classify(err)
		if ae.status >= 500 {
			return nil, err
		}
		pg.Error = ae.Message
		return pg, nil
	}
	form.Result = &v
	return pg, nil
}
