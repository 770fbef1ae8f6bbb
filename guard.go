package belay

import (
	"slices"

	"github.com/belayrun/belay/internal/ledger"
	"github.com/belayrun/belay/model"
)

// guardState is what the guards must remember across a crash: without it a
// resumed run would reset its loop counters. It is rewritten at every
// checkpoint, so it is bounded: its size does not grow with the run.
type guardState struct {
	// Calls counts tool calls.
	Calls int `json:"calls"`
	// LastCall and Repeats track the same call made again and again.
	LastCall string `json:"last_call,omitempty"`
	Repeats  int    `json:"repeats"`
	// Recent holds the latest call signatures, newest last.
	Recent []string `json:"recent,omitempty"`
	// Facts holds fingerprints of the latest results that were new to the
	// run; a result already among them is not progress.
	Facts []string `json:"facts,omitempty"`
	// StaleSteps counts turns since the last one that learned something.
	StaleSteps int `json:"stale_steps"`
}

const (
	recentCalls = 6
	factMemory  = 32
)

// observe records one call and its result and reports whether the result
// put a new fact in the run.
func (g *guardState) observe(use model.Block, res model.Block) bool {
	g.Calls++
	sig := use.Name + ":" + ledger.Hash(use.Input)[:12]
	if sig == g.LastCall {
		g.Repeats++
	} else {
		g.LastCall, g.Repeats = sig, 0
	}
	g.Recent = appendBounded(g.Recent, sig, recentCalls)
	if res.IsError {
		return false
	}
	fact := use.Name + ":" + ledger.Hash([]byte(res.Content))[:12]
	if slices.Contains(g.Facts, fact) {
		return false
	}
	g.Facts = appendBounded(g.Facts, fact, factMemory)
	return true
}

func (g *guardState) endTurn(progressed bool) {
	if progressed {
		g.StaleSteps = 0
	} else {
		g.StaleSteps++
	}
}

func appendBounded(s []string, v string, n int) []string {
	s = append(s, v)
	if len(s) > n {
		s = slices.Delete(s, 0, len(s)-n)
	}
	return s
}
