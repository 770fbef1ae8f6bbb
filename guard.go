package belay

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/belayrun/belay/internal/guard"
	"github.com/belayrun/belay/internal/ledger"
	"github.com/belayrun/belay/model"
)

// LoopDetector configures how a run is found stuck. The default, "progress",
// fires when Patience tool calls in a row put no new fact in the run: it is
// the only detector that catches an agent drifting through ever-different
// searches, and it leaves healthy runs that retry a read alone. "exact",
// "canonical" and "window" are the other detectors of the source texts;
// "off" disables detection.
//
// The first firing sends the model one REPLAN message; the second escalates
// the run to a person.
type LoopDetector struct {
	// Mode is progress (default), exact, canonical, window or off.
	Mode string
	// Window is how many recent calls "window" looks back over. Default 6.
	Window int
	// Patience is how many calls without a new fact fire "progress".
	// Default 4.
	Patience int
	// Repeats is how many identical calls in a row after the first fire
	// "exact" and "canonical". Default 2.
	Repeats int
}

func (l LoopDetector) detector() (guard.Detector, bool, error) {
	if l.Mode == "off" {
		return guard.Detector{}, false, nil
	}
	d := guard.Detector{Window: l.Window, Patience: l.Patience, Repeats: l.Repeats}
	if l.Mode != "" {
		m, err := guard.ParseMode(l.Mode)
		if err != nil {
			return d, false, err
		}
		d.Mode = m
	}
	d = d.WithDefaults()
	return d, true, d.Validate()
}

// guardState is what the guards must remember across a crash: without it a
// resumed run would reset its loop counters. It is rewritten at every
// checkpoint, so it is bounded: its size does not grow with the run.
type guardState struct {
	// Calls counts tool calls.
	Calls int `json:"calls"`
	// Loop is the loop detector's state.
	Loop guard.State `json:"loop"`
	// Facts holds fingerprints of the latest results that were new to the
	// run; a result already among them is not progress.
	Facts []string `json:"facts,omitempty"`
	// CutOff is the index, plus one, of an assistant message whose output
	// ran into the token limit while it had tool calls: their arguments may
	// be incomplete (a provider's stream may even close them as {}), so
	// none of them runs. Zero is none.
	CutOff int `json:"cut_off,omitempty"`
	// ModelFailures counts the model calls in a row that failed for a
	// reason waiting may cure (load, a lost connection): the run waits
	// longer after each, and a person is asked after maxModelFailures.
	ModelFailures int `json:"model_failures,omitempty"`
	// ModelFailingSince is when the first of those failures happened: an
	// interactive agent's run escalates once it is Interactive.MaxWait ago.
	ModelFailingSince time.Time `json:"model_failing_since,omitzero"`
	// Sleeps holds, by tool_use id, when a call that asked to come back
	// later (ResumeAfter) is due.
	Sleeps map[string]time.Time `json:"sleeps,omitempty"`
	// Fork, on a fork, names where it came from (fork.go); Rebuild says
	// the state above is to be rebuilt from the run's history, as its
	// parent's was at the fork's step, when a worker first loads it.
	Fork    *forkOrigin `json:"fork,omitempty"`
	Rebuild bool        `json:"rebuild,omitempty"`
}

// factMemory bounds Facts: a result seen more than this many new facts ago
// counts as new again, which errs on the side of progress.
const factMemory = 32

// newFact reports whether a tool result puts a new fact in the run: a side
// effect applied, or a result not seen before. A tool may say for itself
// what counts (a poll whose status changed, say).
func (g *guardState) newFact(tool *Tool, use model.Block, res model.Block, applied bool) bool {
	if res.IsError {
		return false
	}
	if tool != nil && tool.NewFact != nil {
		return tool.NewFact(use.Input, json.RawMessage(res.Content))
	}
	fact := use.Name + ":" + ledger.Hash([]byte(res.Content))[:12]
	if slices.Contains(g.Facts, fact) {
		return applied
	}
	g.Facts = append(g.Facts, fact)
	if len(g.Facts) > factMemory {
		g.Facts = slices.Delete(g.Facts, 0, len(g.Facts)-factMemory)
	}
	return true
}

// replanMessage is the one message a run gets when its loop detector first
// fires.
func replanMessage(d guard.Detector) string {
	why := map[guard.Mode]string{
		guard.Progress:  fmt.Sprintf("the last %d tool calls found nothing new", d.Patience),
		guard.Exact:     "you made the same call again and again",
		guard.Canonical: "you made the same call again and again, worded differently",
		guard.Window:    fmt.Sprintf("you repeated a call from the last %d", d.Window),
	}[d.Mode]
	return "REPLAN: " + why + ". Stop repeating what has not worked: change approach, or tell the customer what you know and escalate to a person."
}
