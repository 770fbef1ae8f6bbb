package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/belayrun/belay"
)

// stdioServer runs this test binary as an MCP server over stdio.
func stdioServer(t *testing.T) Server {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Server{Name: "child", Command: []string{exe}, Stderr: &testWriter{t: t},
		// A race-enabled binary sleeps a second before it exits, unless told.
		Env: []string{childEnv + "=stdio", "GORACE=atexit_sleep_ms=0"}}
}

// testWriter logs the server's standard error with the test.
type testWriter struct {
	mu sync.Mutex
	t  *testing.T
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t.Logf("server stderr: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func pidOf(t *testing.T, tool belay.Tool) int {
	t.Helper()
	var out struct{ PID int }
	if err := json.Unmarshal([]byte(mustCall(t, tool, `{}`)), &out); err != nil || out.PID == 0 {
		t.Fatalf("pid: %v", err)
	}
	return out.PID
}

func TestStdioTools(t *testing.T) {
	t.Parallel()
	c := connect(t, stdioServer(t))
	tools := toolsOf(t, c)
	if tools["refund"].Effect != belay.Irreversible || tools["lookup_order"].Effect != belay.Read || !tools["set_status"].HonorsKey {
		t.Errorf("effects over stdio: refund %s, lookup_order %s, set_status honors key %v",
			tools["refund"].Effect, tools["lookup_order"].Effect, tools["set_status"].HonorsKey)
	}
	if got := mustCall(t, tools["lookup_order"], `{"order_id":"A-1"}`); got != `{"order_id":"A-1","status":"shipped"}` {
		t.Errorf("lookup_order = %s", got)
	}
	if _, err := call(t, tools["fail"], `{}`); err == nil || err.Error() != "order A-9 not found" {
		t.Errorf("fail: err = %v", err)
	}

	// The server inherits only what a program needs, and what it was given.
	var out struct{ Env []string }
	if err := json.Unmarshal([]byte(mustCall(t, tools["env"], `{}`)), &out); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, kv := range out.Env {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
		if name != childEnv && name != "GORACE" && !slices.Contains(inheritedEnv, name) {
			t.Errorf("the server inherited %s", name)
		}
	}
	if !slices.Contains(names, childEnv) || !slices.Contains(names, "PATH") {
		t.Errorf("server environment %v, want %s and PATH", names, childEnv)
	}
}

// A killed server is restarted: the call that finds it dead is transient,
// the next one runs on a new process.
func TestStdioKilledServerRestarts(t *testing.T) {
	t.Parallel()
	c := connect(t, stdioServer(t))
	tools := toolsOf(t, c)
	pid1 := pidOf(t, tools["pid"])
	kill(t, pid1)

	_, err := call(t, tools["pid"], `{}`)
	if !isTransient(err) {
		t.Fatalf("call to a killed server: err = %v, want transient", err)
	}
	if pid2 := pidOf(t, tools["pid"]); pid2 == pid1 {
		t.Errorf("the call after the failure ran on the killed process %d", pid1)
	}
}

// Calls racing into a dead server start one new process between them.
func TestStdioConcurrentCallsRestartOnce(t *testing.T) {
	t.Parallel()
	c := connect(t, stdioServer(t))
	tools := toolsOf(t, c)
	pid1 := pidOf(t, tools["pid"])
	kill(t, pid1)

	var wg sync.WaitGroup
	pids := make([]int, 8)
	for i := range pids {
		wg.Go(func() {
			out, err := tools["pid"].Call(t.Context(), json.RawMessage(`{}`))
			if err != nil {
				if !isTransient(err) {
					t.Errorf("call %d: err = %v, want transient", i, err)
				}
				return
			}
			var v struct{ PID int }
			_ = json.Unmarshal(out, &v)
			pids[i] = v.PID
		})
	}
	wg.Wait()
	pid2 := pidOf(t, tools["pid"])
	for i, pid := range pids {
		if pid != 0 && pid != pid2 {
			t.Errorf("call %d ran on process %d; the restarted server is %d (killed: %d)", i, pid, pid2, pid1)
		}
	}
}

// A server that dies holding a call leaves its outcome unknown: an
// irreversible tool is not called again blindly, an idempotent one is
// transient. Either way the next call runs on a new process.
func TestStdioServerDiesDuringCall(t *testing.T) {
	t.Parallel()
	c := connect(t, stdioServer(t))
	tools := toolsOf(t, c)
	pid1 := pidOf(t, tools["pid"])

	_, err := call(t, tools["crash"], `{}`)
	if !errors.Is(err, belay.ErrUnknownOutcome) || isTransient(err) {
		t.Fatalf("irreversible call lost with its server: err = %v, want an unknown outcome, not transient", err)
	}
	pid2 := pidOf(t, tools["pid"])
	if pid2 == pid1 {
		t.Fatalf("no new process after the crash")
	}

	_, err = call(t, tools["crash_idempotent"], `{}`)
	if !isTransient(err) || errors.Is(err, belay.ErrUnknownOutcome) {
		t.Fatalf("idempotent call lost with its server: err = %v, want transient", err)
	}
	if pid3 := pidOf(t, tools["pid"]); pid3 == pid2 {
		t.Errorf("no new process after the second crash")
	}
}

func TestStdioCommandNotFound(t *testing.T) {
	t.Parallel()
	_, err := Connect(t.Context(), Server{Name: "missing", Command: []string{"belay-no-such-mcp-server"}})
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("Connect to a command that does not exist: err = %v", err)
	}
}

// A server that never answers the handshake fails Connect at the caller's
// deadline, and its process is ended.
func TestStdioConnectDeadline(t *testing.T) {
	t.Parallel()
	srv := stdioServer(t)
	srv.Env[0] = childEnv + "=silent"
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := Connect(ctx, srv)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Connect to a silent server: err = %v, want the deadline", err)
	}
}

func kill(t *testing.T, pid int) {
	t.Helper()
	p, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Release()
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
}
