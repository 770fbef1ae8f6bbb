package server

// An escalation packet as the person taking over reads it: what was asked,
// what was tried, what was done to the world, why the run stopped and what
// the customer was told.

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

type packetView struct {
	Status store.Status
	// Why is the stop reason in a sentence, Reason the runtime's name for
	// it and Detail its figures.
	Why    string
	Reason string
	Detail string
	Asked  string
	Tried  []triedView
	// SideEffects are what the run did, or may have done, to the world:
	// each under the key that keeps it from being done twice.
	SideEffects []belay.SideEffect
	Missing     []string
	Customer    string
	Trace       string
	At          time.Time
	// Read says whether the packet decoded; one that did not is shown as
	// its JSON alone.
	Read bool
	// Raw is the packet's JSON, indented, behind a disclosure.
	Raw string
}

// triedView is one call an escalated run made, with its outcome split into
// its kind (ok, error, not run, unknown) and what it said.
type triedView struct {
	Step    int
	Tool    string
	Args    []field
	Outcome string
	Said    string
	Class   string
}

// packet reads a run's escalation packet. The packet is built by the
// runtime with the arguments of its calls already redacted.
func packet(raw json.RawMessage) packetView {
	v := packetView{Raw: prettyJSON(raw)}
	var p belay.Escalation
	if err := json.Unmarshal(raw, &p); err != nil {
		return v
	}
	v.Read = true
	v.Status, v.Reason, v.Detail, v.Asked = p.Status, p.Reason, detailWords(p.Detail), p.Asked
	v.Why = stopSentence(p.Status, p.Reason)
	v.SideEffects, v.Missing, v.Customer, v.Trace, v.At = p.SideEffects, p.Missing, p.CustomerMessage, p.Trace, p.At
	for _, c := range p.Tried {
		t := triedView{Step: c.Step, Tool: c.Tool, Args: fields(c.Args)}
		t.Outcome, t.Said, t.Class = outcome(c.Outcome)
		v.Tried = append(v.Tried, t)
	}
	return v
}

// outcome splits a tried call's outcome ("ok: {...}", "error: ...", "not
// run", "outcome unknown: ...") into a label, what the call said, and a
// class for its colour.
func outcome(s string) (label, said, class string) {
	kind, rest, _ := strings.Cut(s, ": ")
	switch kind {
	case "ok":
		return "ok", rest, "out-ok"
	case "error":
		return "error", rest, "out-error"
	case "outcome unknown":
		return "may have happened", rest, "out-unknown"
	case "not run":
		return "not run", "", "out-none"
	}
	return "", s, "out-none"
}

// detailWords shows a stop's detail as a person reads it: a detail that is
// a JSON object (verification's {"complete":false,"missing":[...]}) field
// by field, lists of words joined; any other detail as it is.
func detailWords(detail string) string {
	raw := json.RawMessage(detail)
	var obj map[string]json.RawMessage
	if !strings.HasPrefix(strings.TrimSpace(detail), "{") || json.Unmarshal(raw, &obj) != nil {
		return detail
	}
	var parts []string
	for _, f := range fields(raw) {
		parts = append(parts, strings.ToLower(f.Name)+": "+f.Value)
	}
	return strings.Join(parts, "; ")
}
