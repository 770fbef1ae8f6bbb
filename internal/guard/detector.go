package guard

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Mode names a stuck-loop detector.
type Mode string

const (
	// Exact fires when the same tool is called with the same arguments
	// Repeats times in a row after the first call. Arguments are compared
	// as canonical JSON, so key order, whitespace and number spelling do
	// not matter. Misses reworded calls, cycles and drift.
	Exact Mode = "exact"
	// Canonical is Exact with the arguments' words normalised: each value
	// lowercased, split on whitespace and its words sorted, then the values
	// sorted, field names ignored. "Refund Policy" and "policy refund" are
	// the same query. Misses cycles and drift.
	Canonical Mode = "canonical"
	// Window fires when a call (tool and exact arguments) is among the last
	// Window calls. Catches cycles but also fires on nearly every healthy
	// run that retries a read, so it is not fit to leave switched on.
	Window Mode = "window"
	// Progress fires when Patience calls in a row put no new fact in the
	// run's ledger. The only detector that catches drift, the one with few
	// false alarms, and the default.
	Progress Mode = "progress"
)

var modes = []Mode{Exact, Canonical, Window, Progress}

// ParseMode returns the mode named s.
func ParseMode(s string) (Mode, error) {
	m := Mode(s)
	if slices.Contains(modes, m) {
		return m, nil
	}
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = string(m)
	}
	return "", fmt.Errorf("unknown loop detector %q: want one of %s", s, strings.Join(names, ", "))
}

// Call is one tool call of a run, as a detector sees it.
type Call struct {
	Tool string
	// Args are the call's JSON arguments.
	Args json.RawMessage
	// NewFact reports whether the call's result put a new fact in the run's
	// ledger: a record not seen before, a side effect applied, a question
	// answered. Only the Progress detector reads it.
	NewFact bool
}

// Detector decides when a run is stuck. Its zero value is the Progress
// detector with the defaults below.
type Detector struct {
	// Mode is the detector used. Default Progress.
	Mode Mode
	// Window is how many recent calls the Window detector looks back over.
	// Default 6.
	Window int
	// Patience is how many calls in a row without a new fact make the
	// Progress detector fire. Default 4.
	Patience int
	// Repeats is how many times a call must follow an identical one for the
	// Exact and Canonical detectors to fire. Default 2: they fire on the
	// third identical call in a row.
	Repeats int
}

// WithDefaults returns d with its zero fields set to their defaults.
func (d Detector) WithDefaults() Detector {
	if d.Mode == "" {
		d.Mode = Progress
	}
	if d.Window == 0 {
		d.Window = 6
	}
	if d.Patience == 0 {
		d.Patience = 4
	}
	if d.Repeats == 0 {
		d.Repeats = 2
	}
	return d
}

// Validate reports whether d, once defaults are applied, can detect anything.
func (d Detector) Validate() error {
	d = d.WithDefaults()
	if _, err := ParseMode(string(d.Mode)); err != nil {
		return err
	}
	switch {
	case d.Window < 1:
		return fmt.Errorf("loop detector window %d: want at least 1", d.Window)
	case d.Patience < 1:
		return fmt.Errorf("loop detector patience %d: want at least 1", d.Patience)
	case d.Repeats < 1:
		return fmt.Errorf("loop detector repeats %d: want at least 1", d.Repeats)
	}
	return nil
}

// Observe records c in s and reports whether the detector fires on it. It
// keeps firing on every further call while the run stays stuck; the caller
// decides what a firing means and calls [State.Reset] once it has acted.
// Observe never changes s.Fired. A detector that fails Validate never fires.
func (d Detector) Observe(s *State, c Call) bool {
	d = d.WithDefaults()
	if d.Validate() != nil {
		return false
	}
	switch d.Mode {
	case Exact, Canonical:
		var sig string
		if d.Mode == Canonical {
			sig = canonicalSignature(c.Tool, c.Args)
		} else {
			sig = exactSignature(c.Tool, c.Args)
		}
		if sig == s.Last {
			s.Repeats++
		} else {
			s.Repeats = 0
		}
		s.Last = sig
		return s.Repeats >= d.Repeats
	case Window:
		sig := exactSignature(c.Tool, c.Args)
		fired := slices.Contains(s.Recent, sig)
		s.Recent = append(s.Recent, sig)
		if n := len(s.Recent) - d.Window; n > 0 {
			// Copy rather than reslice, so the backing array stays small too.
			s.Recent = slices.Clone(s.Recent[n:])
		}
		return fired
	case Progress:
		if c.NewFact {
			s.Stale = 0
		} else {
			s.Stale++
		}
		return s.Stale >= d.Patience
	}
	return false
}
