package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/belayrun/belay/internal/testrun"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// childEnv makes the test binary, started again by a test, serve MCP over
// stdio instead of running tests.
const childEnv = "BELAY_MCP_TEST_CHILD"

// Every goroutine a client starts ends with Close.
func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "silent": // reads requests and never answers
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	case "stdio":
		if err := newTestServer(nil, true).Run(context.Background(), &mcpsdk.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "test server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	testrun.Main(m)
}

// recorder keeps what a test server was called with.
type recorder struct {
	mu    sync.Mutex
	calls []recorded
}

type recorded struct {
	Tool string
	Meta map[string]any
	Args json.RawMessage
}

func (r *recorder) add(c recorded) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, c)
}

func (r *recorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.calls...)
}

func (r *recorder) last(t *testing.T) recorded {
	t.Helper()
	calls := r.all()
	if len(calls) == 0 {
		t.Fatal("the server recorded no call")
	}
	return calls[len(calls)-1]
}

func ptr[T any](v T) *T { return &v }

var objectSchema = json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`)

type lookupIn struct {
	OrderID string `json:"order_id" jsonschema:"the order"`
}

type lookupOut struct {
	OrderID string `json:"order_id"`
	Status  string `json:"status"`
}

// newTestServer is the MCP server of these tests: tools with each kind of
// annotation, and, over stdio, tools that report the process and end it.
func newTestServer(rec *recorder, stdio bool) *mcpsdk.Server {
	s := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "belay-test", Version: "1"}, nil)
	text := func(name, reply string, a *mcpsdk.ToolAnnotations) {
		s.AddTool(&mcpsdk.Tool{Name: name, Description: "The " + name + " tool.", InputSchema: objectSchema, Annotations: a},
			func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				rec.add(recorded{Tool: name, Meta: req.Params.Meta, Args: req.Params.Arguments})
				return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: reply}}}, nil
			})
	}
	mcpsdk.AddTool(s, &mcpsdk.Tool{Name: "lookup_order", Description: "Look up an order.",
		Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest, in lookupIn) (*mcpsdk.CallToolResult, lookupOut, error) {
			args, _ := json.Marshal(req.Params.Arguments)
			rec.add(recorded{Tool: "lookup_order", Meta: req.Params.Meta, Args: args})
			return nil, lookupOut{OrderID: in.OrderID, Status: "shipped"}, nil
		})
	text("refund", "refunded", &mcpsdk.ToolAnnotations{DestructiveHint: ptr(true)})
	text("add_note", `{"ok":true,"note":1}`, &mcpsdk.ToolAnnotations{DestructiveHint: ptr(false)})
	text("set_status", `{"ok":true}`, &mcpsdk.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true})
	text("legacy", "done", nil)
	text("hinted_write", "done", &mcpsdk.ToolAnnotations{Title: "Hinted"})
	s.AddTool(&mcpsdk.Tool{Name: "fail", InputSchema: objectSchema, Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			rec.add(recorded{Tool: "fail", Meta: req.Params.Meta, Args: req.Params.Arguments})
			return &mcpsdk.CallToolResult{IsError: true, Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "order A-9 not found"}}}, nil
		})
	s.AddTool(&mcpsdk.Tool{Name: "two_parts", InputSchema: objectSchema, Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
			return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
				&mcpsdk.TextContent{Text: "first"},
				&mcpsdk.ImageContent{MIMEType: "image/png", Data: []byte{1, 2, 3}},
				&mcpsdk.TextContent{Text: "last"},
			}}, nil
		})
	if stdio {
		pid := func(name string, a *mcpsdk.ToolAnnotations) {
			s.AddTool(&mcpsdk.Tool{Name: name, InputSchema: objectSchema, Annotations: a},
				func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
					return &mcpsdk.CallToolResult{StructuredContent: map[string]any{"pid": os.Getpid()}}, nil
				})
		}
		pid("pid", &mcpsdk.ToolAnnotations{ReadOnlyHint: true})
		pid("pid_irreversible", nil)
		exit := func(name string, a *mcpsdk.ToolAnnotations) {
			s.AddTool(&mcpsdk.Tool{Name: name, InputSchema: objectSchema, Annotations: a},
				func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
					os.Exit(3) // dies holding the request
					return nil, nil
				})
		}
		exit("crash", &mcpsdk.ToolAnnotations{DestructiveHint: ptr(true)})
		exit("crash_idempotent", &mcpsdk.ToolAnnotations{DestructiveHint: ptr(false), IdempotentHint: true})
		s.AddTool(&mcpsdk.Tool{Name: "env", InputSchema: objectSchema, Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
			func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				return &mcpsdk.CallToolResult{StructuredContent: map[string]any{"env": os.Environ()}}, nil
			})
		s.AddTool(&mcpsdk.Tool{Name: "meta", InputSchema: objectSchema, Annotations: &mcpsdk.ToolAnnotations{ReadOnlyHint: true}},
			func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				return &mcpsdk.CallToolResult{StructuredContent: map[string]any{"meta": req.Params.Meta}}, nil
			})
	}
	return s
}

// httpServer serves newTestServer over streamable HTTP. restart makes it
// forget its sessions, as a restarted server does; busy makes it answer
// 503 with a Retry-After.
type httpServer struct {
	*httptest.Server
	rec     *recorder
	handler atomic.Pointer[mcpsdk.StreamableHTTPHandler]
	busy    atomic.Bool
	restart func()
}

func startHTTP(t *testing.T) *httpServer {
	t.Helper()
	hs := &httpServer{rec: &recorder{}}
	s := newTestServer(hs.rec, false)
	hs.restart = func() {
		hs.handler.Store(mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s }, nil))
	}
	hs.restart()
	hs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hs.busy.Load() && r.Method == http.MethodPost {
			w.Header().Set("Retry-After", "7")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		hs.handler.Load().ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		hs.Close()
		// Sessions a restart forgot, or whose client never got to delete
		// them, end with the test.
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
	})
	return hs
}
