package belay

import (
	"testing"

	"github.com/belayrun/belay/internal/testrun"
)

// Every goroutine a runtime starts exits with it.
func TestMain(m *testing.M) { testrun.Main(m) }
