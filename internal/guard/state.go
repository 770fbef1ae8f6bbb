package guard

// State is what a detector remembers between calls. The runtime saves it in
// every checkpoint so a resumed run keeps its counters; it is bounded, its
// JSON at most a few hundred bytes however long the run.
type State struct {
	// Last is the signature of the previous call (Exact, Canonical).
	Last string `json:"last,omitempty"`
	// Repeats counts the calls in a row identical to the one before them
	// (Exact, Canonical).
	Repeats int `json:"rep,omitempty"`
	// Recent holds the signatures of the latest calls, oldest first, at
	// most Detector.Window of them (Window).
	Recent []string `json:"recent,omitempty"`
	// Stale counts the calls in a row without a new fact (Progress).
	Stale int `json:"stale,omitempty"`
	// Fired counts the times the runtime has acted on a firing: the first
	// sends the model a request to replan, the second escalates. Observe
	// never changes it.
	Fired int `json:"fired,omitempty"`
}

// Reset forgets the calls observed so far, keeping Fired: after a replan
// the run starts again from a clean slate, but the replan is remembered.
func (s *State) Reset() {
	*s = State{Fired: s.Fired}
}
