package belay

import "time"

// For the tests of package belay_test, which may import the packages that
// import belay (metrics, tracing) and still need the runtime's test clock.

// SetTestClock makes c's runtime read the time from now.
func SetTestClock(c *Config, now func() time.Time) { c.now = now }

// NewTestClock is the test clock of package belay's own tests.
var NewTestClock = newClock
