package mcp

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/belayrun/belay"
)

// A server that died between calls never saw the next request, so even an
// irreversible call is transient: retried, not left unknown.
func TestStdioDeadServerIrreversibleCallIsTransient(t *testing.T) {
	t.Parallel()
	c := connect(t, stdioServer(t))
	tools := toolsOf(t, c)
	pid := pidOf(t, tools["pid"])
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Skipf("pidfd_open: %v", err)
	}
	defer unix.Close(fd)
	kill(t, pid)
	waitExited(t, fd)

	_, err = call(t, tools["pid_irreversible"], `{}`)
	if !isTransient(err) || errors.Is(err, belay.ErrUnknownOutcome) {
		t.Fatalf("irreversible call to a dead server: err = %v, want transient", err)
	}
	mustCall(t, tools["pid_irreversible"], `{}`)
}

// waitExited waits until the process behind a pidfd has exited (its file
// descriptors, the pipes to the client included, are closed by then).
func waitExited(t *testing.T, fd int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(time.Until(deadline).Milliseconds()))
		switch {
		case n == 1:
			return
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			t.Fatalf("poll pidfd: %v", err)
		default:
			t.Fatal("the killed server did not exit within 10s")
		}
	}
}
