package mcp

import (
	"cmp"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
)

// The MCP reference server @modelcontextprotocol/server-everything, at the
// version testdata/everything/package-lock.json pins. .ci/run installs it:
//
//	npm ci --prefix tools/mcp/testdata/everything
//
// BELAY_MCP_EVERYTHING, if set, names another copy's dist/index.js.
const (
	everythingEnv   = "BELAY_MCP_EVERYTHING"
	everythingEntry = "testdata/everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)

// everythingServer is the reference server over stdio. Without it the test
// is skipped, except in CI, where it must run.
func everythingServer(t *testing.T) Server {
	t.Helper()
	missing := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI must run the test against a real MCP server: "+format, args...)
		}
		t.Skipf("SKIPPING the test against a real MCP server: "+format, args...)
	}
	entry := cmp.Or(os.Getenv(everythingEnv), everythingEntry)
	if _, err := os.Stat(entry); err != nil {
		missing("%v (install it: npm ci --prefix tools/mcp/testdata/everything)", err)
	}
	entry, err := filepath.Abs(entry)
	if err != nil {
		t.Fatal(err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node: %v", err)
	}
	return Server{Name: "everything", Command: []string{node, entry, "stdio"},
		Env: []string{"BELAY_TEST_MARKER=present"}, Stderr: &testWriter{t: t},
		// The server does not always exit when its input closes; it is
		// terminated after the grace period, which need not be long here.
		ShutdownGrace: time.Second}
}

func TestEverythingServer(t *testing.T) {
	t.Parallel()
	c := connect(t, everythingServer(t))
	tools := toolsOf(t, c)
	for _, name := range []string{"echo", "get-sum", "get-env", "get-structured-content"} {
		tool, ok := tools[name]
		if !ok {
			t.Fatalf("the reference server lists no %s", name)
		}
		// All of them say readOnlyHint and idempotentHint.
		if tool.Effect != belay.Read || !tool.HonorsKey {
			t.Errorf("%s: effect %s, honors key %v; want read from its annotations", name, tool.Effect, tool.HonorsKey)
		}
		if tool.Description == "" || len(tool.InputSchema) == 0 {
			t.Errorf("%s: description %q, schema %s", name, tool.Description, tool.InputSchema)
		}
	}

	if got := mustCall(t, tools["echo"], `{"message":"hello"}`); got != `"Echo: hello"` {
		t.Errorf("echo = %s", got)
	}
	if got := mustCall(t, tools["get-sum"], `{"a":2,"b":3}`); got != `"The sum of 2 and 3 is 5."` {
		t.Errorf("get-sum = %s", got)
	}
	var weather struct {
		Temperature *float64
		Conditions  string
	}
	if err := json.Unmarshal([]byte(mustCall(t, tools["get-structured-content"], `{"location":"Chicago"}`)), &weather); err != nil || weather.Temperature == nil || weather.Conditions == "" {
		t.Errorf("get-structured-content: %+v (%v), want the structured weather", weather, err)
	}
	// The server validates arguments: a wrong one is its error, for the model.
	if _, err := call(t, tools["get-sum"], `{"a":"two","b":3}`); err == nil || isTransient(err) {
		t.Errorf("get-sum with a string: err = %v, want the server's error", err)
	}

	// The process got the configured variable and none of Belay's secrets.
	var env map[string]string
	if err := json.Unmarshal([]byte(mustCall(t, tools["get-env"], `{}`)), &env); err != nil {
		t.Fatal(err)
	}
	if env["BELAY_TEST_MARKER"] != "present" {
		t.Errorf("the server's environment lacks BELAY_TEST_MARKER")
	}
	for name := range env {
		if name != "BELAY_TEST_MARKER" && !slices.Contains(inheritedEnv, name) {
			t.Errorf("the server inherited %s", name)
		}
	}

	// Its schemas are ones an agent accepts, and a run calls it.
	runAgent(t, []belay.Tool{tools["get-sum"], tools["echo"], tools["get-structured-content"]},
		scripted.Reply{Calls: []scripted.Call{{Name: "get-sum", Args: map[string]any{"a": 1, "b": 2}}}},
		scripted.Reply{Text: "1 + 2 = 3."},
	)
}
