package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// providerNameRE is what Anthropic and OpenAI accept as a tool name.
var providerNameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

var awkwardNames = []string{
	"files.read", "files/read", "files_read", // two rewrite as the third is
	"notes.add",                           // rewrites alone
	"résumé.get",                          // not ASCII
	"get-order",                           // valid as it is
	strings.Repeat("long_name_", 7) + "a", // 71 characters
	strings.Repeat("long_name_", 7) + "b",
}

// namedServer serves one text tool per name, answering with the name it was
// called by.
func namedServer(t *testing.T, names []string) string {
	t.Helper()
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "names", Version: "1"}, nil)
	for _, name := range names {
		s.AddTool(&mcpsdk.Tool{Name: name, InputSchema: objectSchema, Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
			func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				return &mcpsdk.CallToolResult{StructuredContent: map[string]any{"called": req.Params.Name}}, nil
			})
	}
	srv := httptest.NewServer(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s }, nil))
	t.Cleanup(func() {
		srv.Close()
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
	})
	return srv.URL
}

// Tool names a provider refuses are rewritten for it, each to its own
// name, and the calls reach the server under the server's names.
func TestToolNamesAreRewrittenForProviders(t *testing.T) {
	t.Parallel()
	url := namedServer(t, awkwardNames)
	tools, err := connect(t, Server{Name: "names", URL: url, Prefix: "fs."}).Tools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, tool := range tools {
		if !providerNameRE.MatchString(tool.Name) {
			t.Errorf("tool name %q: a provider refuses it", tool.Name)
		}
		if seen[tool.Name] {
			t.Errorf("two tools named %q", tool.Name)
		}
		seen[tool.Name] = true
	}
	if len(tools) != len(awkwardNames) {
		t.Fatalf("%d tools, want %d", len(tools), len(awkwardNames))
	}
	// Each calls the server's tool by the server's name: the names map back.
	called := map[string]bool{}
	for _, tool := range tools {
		var out struct {
			Called string `json:"called"`
		}
		mustUnmarshalJSON(t, mustCall(t, tool, `{}`), &out)
		called[out.Called] = true
	}
	for _, name := range awkwardNames {
		if !called[name] {
			t.Errorf("no tool calls the server's %q", name)
		}
	}

	// A name that is valid as it is, prefix included, is kept; one that
	// rewrites alone reads as the original.
	tools, err = connect(t, Server{Name: "names", URL: url, Prefix: "fs_"}).Tools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"fs_files_read", "fs_get-order", "fs_notes_add", "fs_r_sum__get"} {
		if !slices.Contains(names, want) {
			t.Errorf("names %v, want %s among them", names, want)
		}
	}
}

func mustUnmarshalJSON(t *testing.T, data string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(data), v); err != nil {
		t.Fatalf("%s: %v", data, err)
	}
}

// The rewriting depends on the set of names alone, not on the order a
// server lists them in, nor on the process: an agent's version and the
// runs resumed on it hold across restarts.
func TestRewrittenNamesAreStable(t *testing.T) {
	t.Parallel()
	first, err := providerNames("fs.", awkwardNames)
	if err != nil {
		t.Fatal(err)
	}
	reversed := slices.Clone(awkwardNames)
	slices.Reverse(reversed)
	second, err := providerNames("fs.", reversed)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range awkwardNames {
		if first[name] != second[name] {
			t.Errorf("%q: %q listed in one order, %q in another", name, first[name], second[name])
		}
	}
	// Fixed here, so that a change to the rewriting, which would move
	// every agent that has such tools to a new version, is seen.
	want := map[string]string{
		"files.read": "fs_files_read_2830e9ae",
		"files/read": "fs_files_read_ee0bed7b",
		"files_read": "fs_files_read_f986f462",
		"notes.add":  "fs_notes_add",
	}
	for name, w := range want {
		if first[name] != w {
			t.Errorf("%q rewrites as %q, want %q", name, first[name], w)
		}
	}
}

// Client.Tool finds a tool by the server's name for it, rewritten or not.
func TestToolByTheServersName(t *testing.T) {
	t.Parallel()
	c := connect(t, Server{Name: "names", URL: namedServer(t, awkwardNames), Prefix: "fs_"})
	tool, err := c.Tool(t.Context(), "files/read")
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Called string `json:"called"`
	}
	mustUnmarshalJSON(t, mustCall(t, tool, `{}`), &out)
	if !strings.HasPrefix(tool.Name, "fs_files_read_") || out.Called != "files/read" {
		t.Errorf("tool %q called %q, want fs_files_read_... calling files/read", tool.Name, out.Called)
	}
	if _, err := c.Tool(t.Context(), "files.write"); err == nil || !strings.Contains(err.Error(), "no tool files.write") {
		t.Errorf("a tool the server lacks: err = %v", err)
	}
}
