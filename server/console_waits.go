package server

import (
	"context"
	"encoding/json"
	"time"

	"github.com/belayrun/belay/store"
)

// The run page's card of waits: what the run waits for from outside it (a
// reply, an event, a person's answer, a result), or waited for, with who
// answered.

type waitView struct {
	Kind   store.WaitKind
	Status store.WaitStatus
	// Says is what the run waits for, in words.
	Says    string
	CallID  string
	Expires time.Time
	By      string
}

func (s *Server) waitViews(ctx context.Context, run store.Run) ([]waitView, error) {
	ws, ok := s.st.(store.Waiter)
	if !ok {
		return nil, nil
	}
	waits, err := ws.Waits(ctx, store.ListWaitsParams{Tenant: run.Tenant, RunID: run.ID})
	if err != nil {
		return nil, err
	}
	var out []waitView
	for _, w := range waits {
		out = append(out, waitView{Kind: w.Kind, Status: w.Status, Says: waitSays(w), CallID: w.ToolUseID, Expires: w.ExpiresAt, By: w.AnsweredBy})
	}
	return out, nil
}

// waitSays says what a wait is for, from what the run asked.
func waitSays(w store.Wait) string {
	var p struct {
		Question string `json:"question"`
		Name     string `json:"name"`
		Role     string `json:"role"`
	}
	_ = json.Unmarshal(w.Prompt, &p)
	switch w.Kind {
	case store.WaitInput:
		return "Asked the user: " + p.Question
	case store.WaitPerson:
		return "Asked a person (" + p.Role + "): " + p.Question
	case store.WaitEvent:
		return "Waits for the event " + w.Name
	case store.WaitResult:
		return "Waits for the result of " + w.Name + " from outside"
	}
	return string(w.Kind) + " " + w.Name
}
