package belay

import (
	"testing"

	"go.uber.org/goleak"
)

// Every goroutine a runtime starts exits with it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
