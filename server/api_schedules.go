package server

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// Schedules of the key's tenant: GET /v1/schedules, PUT and DELETE
// /v1/schedules/{name}. A PUT creates or replaces, so it is idempotent as
// it is.

type scheduleRequest struct {
	Agent   string `json:"agent"`
	Cron    string `json:"cron"`
	Input   string `json:"input"`
	Overlap string `json:"overlap,omitempty"`
	Missed  string `json:"missed,omitempty"`
}

type scheduleView struct {
	Name        string     `json:"name"`
	Agent       string     `json:"agent"`
	Cron        string     `json:"cron"`
	Input       string     `json:"input"`
	Overlap     string     `json:"overlap"`
	Missed      string     `json:"missed"`
	NextAt      time.Time  `json:"next_at"`
	LastRunID   string     `json:"last_run_id,omitempty"`
	LastFiredAt *time.Time `json:"last_fired_at,omitempty"`
	CreatedBy   string     `json:"created_by"`
	CreatedAt   time.Time  `json:"created_at"`
}

func viewSchedule(s store.Schedule) scheduleView {
	v := scheduleView{Name: s.Name, Agent: s.Agent, Cron: s.Spec, Input: s.Input, Overlap: string(s.Overlap),
		Missed: string(s.Missed), NextAt: s.NextAt.UTC(), LastRunID: s.LastRunID, CreatedBy: s.CreatedBy, CreatedAt: s.CreatedAt.UTC()}
	if !s.LastFiredAt.IsZero() {
		at := s.LastFiredAt.UTC()
		v.LastFiredAt = &at
	}
	return v
}

func (s *Server) listSchedules(w http.ResponseWriter, r *http.Request, p Principal) error {
	list, err := s.rt.Operator().Schedules(r.Context(), p.Tenant)
	if err != nil {
		return err
	}
	views := make([]scheduleView, len(list))
	for i, sc := range list {
		views[i] = viewSchedule(sc)
	}
	writeJSON(w, http.StatusOK, map[string]any{"schedules": views})
	return nil
}

func (s *Server) putSchedule(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req scheduleRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if len(req.Input) > maxInput {
		return errBadRequest("invalid_field", "input is at most %d bytes", maxInput)
	}
	sc, err := s.rt.Operator().AddSchedule(r.Context(), belay.ScheduleRequest{Name: r.PathValue("name"), Tenant: p.Tenant,
		Agent: req.Agent, Cron: req.Cron, Input: req.Input, Overlap: store.OverlapPolicy(req.Overlap),
		Missed: store.MissedPolicy(req.Missed), By: p.Identity()})
	if errors.Is(err, belay.ErrInvalidSchedule) {
		return errBadRequest("invalid_field", "%s", strings.TrimPrefix(err.Error(), belay.ErrInvalidSchedule.Error()+": "))
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, viewSchedule(sc))
	return nil
}

func (s *Server) deleteSchedule(w http.ResponseWriter, r *http.Request, p Principal) error {
	name := r.PathValue("name")
	if err := s.rt.Operator().RemoveSchedule(r.Context(), p.Tenant, name); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "removed": true})
	return nil
}
