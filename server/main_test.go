package server

import (
	"testing"

	"github.com/belayrun/belay/internal/testrun"
)

// Every goroutine a server, its runtime or a test's client starts ends
// with the test.
func TestMain(m *testing.M) { testrun.Main(m) }
