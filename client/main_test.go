package client

import (
	"testing"

	"github.com/belayrun/belay/internal/testrun"
)

// Every goroutine a test's client, server or stream starts ends with the
// test.
func TestMain(m *testing.M) { testrun.Main(m) }
