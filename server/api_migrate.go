package server

import (
	"net/http"

	"github.com/belayrun/belay"
)

// migrationRequest is the body of POST /v1/migrations.
type migrationRequest struct {
	Agent string `json:"agent"`
	From  string `json:"from"`
	To    string `json:"to"`
	Batch int    `json:"batch"`
}

// migrationView is what a bulk migration moved.
type migrationView struct {
	From    string   `json:"from"`
	To      string   `json:"to"`
	Moved   int      `json:"moved"`
	Batches int      `json:"batches"`
	Runs    []string `json:"runs"`
}

// migrate moves every run of the key's tenant paused on version_mismatch at
// one version to another, in batches (belay.Operator.MigrateAll); each move
// is recorded in the run's trace with the key's identity.
func (s *Server) migrate(w http.ResponseWriter, r *http.Request, p Principal) error {
	var req migrationRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	switch {
	case req.From == "" || req.To == "":
		return errBadRequest("invalid_field", "from and to are required: the version the runs are on and the one the workers now run")
	case req.From == req.To:
		return errBadRequest("invalid_field", "from and to are the same version; resume such runs instead")
	case req.Batch < 0 || req.Batch > 1000:
		return errBadRequest("invalid_field", "batch is from 1 to 1000 (default 100)")
	}
	res, err := s.rt.Operator().MigrateAll(r.Context(), belay.MigrateAllOptions{Tenant: p.Tenant, Agent: req.Agent,
		From: req.From, To: req.To, Batch: req.Batch, By: p.Identity()})
	if err != nil {
		return err
	}
	runs := res.Moved
	if runs == nil {
		runs = []string{}
	}
	writeJSON(w, http.StatusOK, migrationView{From: req.From, To: req.To, Moved: len(runs), Batches: res.Batches, Runs: runs})
	return nil
}
