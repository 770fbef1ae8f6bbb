package guard_test

import (
	"encoding/json"
	"fmt"

	"github.com/belayrun/belay/internal/guard"
)

// An agent drifting: a different search every turn, none of them learning
// anything. Only the progress detector, the default, sees it.
func ExampleDetector_Observe() {
	detectors := []guard.Detector{{Mode: guard.Exact}, {Mode: guard.Canonical}, {Mode: guard.Window}, {}}
	states := make([]guard.State, len(detectors))
	for turn := range 6 {
		c := guard.Call{Tool: "search", Args: json.RawMessage(fmt.Sprintf(`{"q":"refund question %d"}`, turn))}
		for i, d := range detectors {
			if d.Observe(&states[i], c) {
				fmt.Printf("turn %d: %s fires\n", turn, d.WithDefaults().Mode)
			}
		}
	}
	// Output:
	// turn 3: progress fires
	// turn 4: progress fires
	// turn 5: progress fires
}
