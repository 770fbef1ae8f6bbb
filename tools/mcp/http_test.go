package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/belayrun/belay"
)

func connect(t *testing.T, srv Server) *Client {
	t.Helper()
	c, err := Connect(t.Context(), srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

func toolsOf(t *testing.T, c *Client) map[string]belay.Tool {
	t.Helper()
	tools, err := c.Tools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]belay.Tool{}
	for _, tool := range tools {
		m[tool.Name] = tool
	}
	return m
}

func call(t *testing.T, tool belay.Tool, args string) (string, error) {
	t.Helper()
	out, err := tool.Call(t.Context(), json.RawMessage(args))
	return string(out), err
}

func mustCall(t *testing.T, tool belay.Tool, args string) string {
	t.Helper()
	out, err := call(t, tool, args)
	if err != nil {
		t.Fatalf("%s: %v", tool.Name, err)
	}
	return out
}

// canonical re-encodes JSON with sorted keys.
func canonical(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func isTransient(err error) bool {
	var te *belay.TransientError
	return errors.As(err, &te)
}

func TestHTTPToolsAndEffects(t *testing.T) {
	t.Parallel()
	hs := startHTTP(t)
	c := connect(t, Server{Name: "shop", URL: hs.URL})
	tools := toolsOf(t, c)

	for _, tc := range []struct {
		name      string
		effect    belay.EffectClass
		honorsKey bool
	}{
		{"lookup_order", belay.Read, true},          // readOnlyHint, idempotentHint
		{"refund", belay.Irreversible, false},       // destructiveHint true
		{"add_note", belay.Write, false},            // destructiveHint false
		{"set_status", belay.Write, true},           // destructiveHint false, idempotentHint
		{"legacy", belay.Irreversible, false},       // no annotations
		{"hinted_write", belay.Irreversible, false}, // annotations without hints
		{"fail", belay.Read, false},
	} {
		tool, ok := tools[tc.name]
		if !ok {
			t.Errorf("tool %s not listed", tc.name)
			continue
		}
		if tool.Effect != tc.effect || tool.HonorsKey != tc.honorsKey {
			t.Errorf("%s: effect %s, honors key %v; want %s, %v", tc.name, tool.Effect, tool.HonorsKey, tc.effect, tc.honorsKey)
		}
		if tool.External || tool.KeyFields != nil || tool.Timeout != 0 {
			t.Errorf("%s: External %v, KeyFields %v, Timeout %v; want the zero values", tc.name, tool.External, tool.KeyFields, tool.Timeout)
		}
	}
	if got := tools["refund"].Description; got != "The refund tool." {
		t.Errorf("refund description %q", got)
	}
	var schema struct {
		Type       string                     `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(tools["lookup_order"].InputSchema, &schema); err != nil || schema.Type != "object" || schema.Properties["order_id"] == nil {
		t.Errorf("lookup_order schema %s (%v): want the server's, with order_id", tools["lookup_order"].InputSchema, err)
	}
	if got, want := canonical(t, tools["refund"].InputSchema), canonical(t, objectSchema); got != want {
		t.Errorf("refund schema %s, want the server's %s", got, want)
	}
}

func TestHTTPCallResults(t *testing.T) {
	t.Parallel()
	hs := startHTTP(t)
	c := connect(t, Server{Name: "shop", URL: hs.URL})
	tools := toolsOf(t, c)

	// Structured content is the result.
	if got := mustCall(t, tools["lookup_order"], `{"order_id":"A-1"}`); got != `{"order_id":"A-1","status":"shipped"}` {
		t.Errorf("lookup_order = %s", got)
	}
	// Text that is JSON stays JSON; other text becomes a JSON string.
	if got := mustCall(t, tools["add_note"], `{"id":"A-1"}`); got != `{"ok":true,"note":1}` {
		t.Errorf("add_note = %s", got)
	}
	if got := mustCall(t, tools["refund"], `{"id":"A-1"}`); got != `"refunded"` {
		t.Errorf("refund = %s", got)
	}
	if got := mustCall(t, tools["two_parts"], `{}`); got != `"first\n[image image/png, 3 bytes]\nlast"` {
		t.Errorf("two_parts = %s", got)
	}
	// Arguments reach the server as sent, decimals and all.
	mustCall(t, tools["add_note"], `{"id":"A-1","amount":288.10}`)
	if got := string(hs.rec.last(t).Args); got != `{"id":"A-1","amount":288.10}` {
		t.Errorf("server got arguments %s", got)
	}

	// isError: the server's text, as a plain error the model reads.
	_, err := call(t, tools["fail"], `{}`)
	if err == nil || err.Error() != "order A-9 not found" || isTransient(err) || errors.Is(err, belay.ErrUnknownOutcome) {
		t.Errorf("fail: err = %v, want the server's text as a plain error", err)
	}
	// A JSON-RPC error (no such tool) is the server's answer too.
	_, err = c.call(t.Context(), "no_such_tool", false, false, json.RawMessage(`{}`))
	if err == nil || isTransient(err) || errors.Is(err, belay.ErrUnknownOutcome) {
		t.Errorf("unknown tool: err = %v, want a plain error", err)
	}
	// The session survived both.
	mustCall(t, tools["lookup_order"], `{"order_id":"A-2"}`)
}

func TestHTTPConfigOverrides(t *testing.T) {
	t.Parallel()
	hs := startHTTP(t)
	c := connect(t, Server{Name: "shop", URL: hs.URL, Prefix: "shop_", Tools: map[string]ToolConfig{
		"lookup_order": {Effect: belay.Write, External: true, KeyFields: []string{"order_id"}, Timeout: 5 * time.Second},
		"refund":       {HonorsKey: true},
		"set_status":   {Effect: belay.Irreversible},
	}})
	tools := toolsOf(t, c)
	if _, ok := tools["lookup_order"]; ok {
		t.Fatal("tools listed without their prefix")
	}
	lookup := tools["shop_lookup_order"]
	if lookup.Effect != belay.Write || !lookup.External || len(lookup.KeyFields) != 1 || lookup.KeyFields[0] != "order_id" || lookup.Timeout != 5*time.Second {
		t.Errorf("shop_lookup_order: effect %s, external %v, key fields %v, timeout %v: configuration must win",
			lookup.Effect, lookup.External, lookup.KeyFields, lookup.Timeout)
	}
	if r := tools["shop_refund"]; r.Effect != belay.Irreversible || !r.HonorsKey {
		t.Errorf("shop_refund: effect %s, honors key %v; want irreversible from its annotations and HonorsKey from configuration", r.Effect, r.HonorsKey)
	}
	if s := tools["shop_set_status"]; s.Effect != belay.Irreversible || !s.HonorsKey {
		t.Errorf("shop_set_status: effect %s, honors key %v", s.Effect, s.HonorsKey)
	}
	// The prefixed tool calls the server's tool by its own name.
	mustCall(t, tools["shop_refund"], `{"id":"A-1"}`)
	if got := hs.rec.last(t).Tool; got != "refund" {
		t.Errorf("server saw a call of %q, want refund", got)
	}

	// IgnoreAnnotations: a tool without a configured effect is irreversible.
	c2 := connect(t, Server{Name: "shop", URL: hs.URL, IgnoreAnnotations: true, Tools: map[string]ToolConfig{"fail": {Effect: belay.Read}}})
	tools = toolsOf(t, c2)
	if l := tools["lookup_order"]; l.Effect != belay.Irreversible || l.HonorsKey {
		t.Errorf("ignored annotations: lookup_order effect %s, honors key %v; want irreversible, false", l.Effect, l.HonorsKey)
	}
	if f := tools["fail"]; f.Effect != belay.Read {
		t.Errorf("ignored annotations: configured fail effect %s, want read", f.Effect)
	}

	// A configured tool the server does not have is an error, not a silent
	// loss of its configuration.
	c3 := connect(t, Server{Name: "shop", URL: hs.URL, Tools: map[string]ToolConfig{"refund_order": {Effect: belay.Irreversible}}})
	if _, err := c3.Tools(t.Context()); err == nil || !strings.Contains(err.Error(), "refund_order") {
		t.Errorf("Tools with an unknown configured tool: err = %v, want one naming refund_order", err)
	}
}

func TestHTTPMetaCarriesOpenTelemetrySpan(t *testing.T) {
	t.Parallel()
	hs := startHTTP(t)
	c := connect(t, Server{Name: "shop", URL: hs.URL})
	tools := toolsOf(t, c)

	state, err := trace.ParseTraceState("vendor=abc")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
		TraceState: state,
	})
	ctx := trace.ContextWithSpanContext(t.Context(), sc)
	if _, err := tools["lookup_order"].Call(ctx, json.RawMessage(`{"order_id":"A-1"}`)); err != nil {
		t.Fatal(err)
	}
	meta := hs.rec.last(t).Meta
	if got := meta[MetaTraceparent]; got != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Errorf("traceparent %v, want the span's", got)
	}
	if got := meta[MetaTracestate]; got != "vendor=abc" {
		t.Errorf("tracestate %v, want vendor=abc", got)
	}

	// Outside a run and without a span there is nothing to carry.
	mustCall(t, tools["lookup_order"], `{"order_id":"A-1"}`)
	if meta := hs.rec.last(t).Meta; meta[MetaTraceparent] != nil || meta[MetaIdempotencyKey] != nil {
		t.Errorf("meta %v, want no traceparent and no key outside a run", meta)
	}
}

func TestHTTPBusyServerIsTransient(t *testing.T) {
	t.Parallel()
	hs := startHTTP(t)
	c := connect(t, Server{Name: "shop", URL: hs.URL})
	tools := toolsOf(t, c)
	before := len(hs.rec.all())

	hs.busy.Store(true)
	_, err := call(t, tools["refund"], `{"id":"A-1"}`)
	var te *belay.TransientError
	if !errors.As(err, &te) || te.RetryAfter != 7*time.Second {
		t.Fatalf("refund on a busy server: err = %v, want transient with the server's Retry-After of 7s", err)
	}
	hs.busy.Store(false)
	mustCall(t, tools["refund"], `{"id":"A-1"}`)
	if got := len(hs.rec.all()) - before; got != 1 {
		t.Errorf("the server ran %d refunds, want 1", got)
	}
}

// A server that restarted has forgotten the session: the request was
// refused without running, so even an irreversible call is transient, and
// the next call opens a new session.
func TestHTTPRestartedServer(t *testing.T) {
	t.Parallel()
	hs := startHTTP(t)
	c := connect(t, Server{Name: "shop", URL: hs.URL})
	tools := toolsOf(t, c)
	mustCall(t, tools["refund"], `{"id":"A-1"}`)
	before := len(hs.rec.all())

	hs.restart()
	_, err := call(t, tools["refund"], `{"id":"A-2"}`)
	if !isTransient(err) || errors.Is(err, belay.ErrUnknownOutcome) {
		t.Fatalf("refund after a server restart: err = %v, want transient", err)
	}
	t.Log(err)
	mustCall(t, tools["refund"], `{"id":"A-2"}`)
	if got := len(hs.rec.all()) - before; got != 1 {
		t.Errorf("the server ran %d refunds after its restart, want 1", got)
	}
}

// A server that is down refuses connections: nothing went out, so calls
// are transient until it is back.
func TestHTTPServerDown(t *testing.T) {
	t.Parallel()
	hs := startHTTP(t)
	// Fresh connections only: a request written to a kept-alive connection
	// just as the server closed it may have been read, which for an
	// irreversible tool is an unknown outcome.
	//
	// Once the server is closed its port is free, and another test's server
	// may take it: a call would then reach that server, and rightly be an
	// unknown outcome. Port 1, where nothing listens, refuses for certain.
	var down atomic.Bool
	var dialer net.Dialer
	noKeepAlive := &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if down.Load() {
				addr = "127.0.0.1:1"
			}
			return dialer.DialContext(ctx, network, addr)
		},
	}}
	c := connect(t, Server{Name: "shop", URL: hs.URL, HTTPClient: noKeepAlive})
	tools := toolsOf(t, c)
	hs.Close()
	down.Store(true)
	for i := range 2 { // the call that finds the server gone, then a reconnect
		_, err := call(t, tools["refund"], `{"id":"A-1"}`)
		if !isTransient(err) || errors.Is(err, belay.ErrUnknownOutcome) {
			t.Fatalf("call %d to a server that is down: err = %v, want transient", i+1, err)
		}
	}
}

func TestConnectValidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		srv  Server
		want string
	}{
		{Server{URL: "http://127.0.0.1:1"}, "without a name"},
		{Server{Name: "x"}, "set Command"},
		{Server{Name: "x", URL: "http://127.0.0.1:1", Command: []string{"srv"}}, "not both"},
		{Server{Name: "x", Command: []string{""}}, "empty command"},
		{Server{Name: "x", Command: []string{"srv"}, Env: []string{"TOKEN"}}, "KEY=VALUE"},
		{Server{Name: "x", URL: "http://127.0.0.1:1", Tools: map[string]ToolConfig{"t": {Effect: "delete"}}}, "unknown effect class"},
	} {
		_, err := Connect(t.Context(), tc.srv)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Connect(%+v): err = %v, want one saying %q", tc.srv, err, tc.want)
		}
	}
}

func TestClosedClient(t *testing.T) {
	t.Parallel()
	hs := startHTTP(t)
	c, err := Connect(t.Context(), Server{Name: "shop", URL: hs.URL})
	if err != nil {
		t.Fatal(err)
	}
	tools := toolsOf(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := call(t, tools["lookup_order"], `{"order_id":"A-1"}`); !errors.Is(err, ErrClosed) || isTransient(err) {
		t.Errorf("call after Close: err = %v, want ErrClosed", err)
	}
	if _, err := c.Tools(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Tools after Close: err = %v, want ErrClosed", err)
	}
}

// A 503 without Retry-After, as a proxy answers when the server behind it
// died after reading the request, is no refusal: the irreversible call may
// have run, so it is an unknown outcome, not retried.
func TestHTTPProxy503AfterTheServerRanIsUnknown(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	s := newTestServer(rec, false)
	inner := mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.Method == http.MethodPost && bytes.Contains(body, []byte(`"tools/call"`)) {
			inner.ServeHTTP(httptest.NewRecorder(), r) // the tool runs; its answer is lost
			http.Error(w, "upstream connect error or disconnect/reset before headers", http.StatusServiceUnavailable)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
	})
	tools := toolsOf(t, connect(t, Server{Name: "shop", URL: srv.URL}))
	_, err := call(t, tools["refund"], `{"id":"A-1"}`)
	if isTransient(err) || !errors.Is(err, belay.ErrUnknownOutcome) {
		t.Errorf("refund answered 503 by a proxy after the server ran it: %v, want an unknown outcome", err)
	}
	if n := len(rec.all()); n != 1 {
		t.Errorf("the server ran %d refunds, want 1", n)
	}
}
