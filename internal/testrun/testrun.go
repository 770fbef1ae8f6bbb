// Package testrun holds what Belay's tests share to wait and to check that
// they leave nothing running: one way to wait for a condition with a
// deadline, and one list of the goroutines a leak check leaves alone. It is
// imported by tests only.
package testrun

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Deadline is how long WaitFor waits before it fails the test.
const Deadline = 30 * time.Second

// WaitFor waits until cond holds, polling it, and fails the test if it
// does not within Deadline. what says what is awaited, for the failure.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Deadline)
	defer cancel()
	if err := WaitUntil(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// WaitUntil polls cond until it holds or ctx ends, and then returns ctx's
// error.
func WaitUntil(ctx context.Context, cond func() bool) error {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// ignored are goroutines libraries start once for the life of the process
// and never end: not leaks of the code under test.
var ignored = []goleak.Option{
	// net/http's idle keep-alive connections of a client transport, which
	// it closes in its own time.
	goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
}

// Main runs the package's tests and then fails the run if any goroutine
// is left running that the shared list does not allow. Use it as TestMain:
// func TestMain(m *testing.M) { testrun.Main(m) }. extra adds a package's
// own.
func Main(m *testing.M, extra ...goleak.Option) {
	os.Exit(Exit(m.Run(), extra...))
}

// Exit is the exit code of a test binary whose tests returned code: 1 if
// they passed but left a goroutine running that the shared list does not
// allow, which it reports. For a TestMain that sets up around m.Run.
func Exit(code int, extra ...goleak.Option) int {
	if code != 0 {
		return code
	}
	if err := goleak.Find(append(append([]goleak.Option{}, ignored...), extra...)...); err != nil {
		fmt.Fprintf(os.Stderr, "goroutines left running after the tests: %v\n", err)
		return 1
	}
	return 0
}
