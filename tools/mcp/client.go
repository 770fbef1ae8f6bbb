package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"runtime/debug"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/belayrun/belay"
)

// ErrClosed is returned for calls made after Client.Close.
var ErrClosed = errors.New("tools/mcp: client closed")

// Client is a connection to one MCP server that survives the server: when
// the connection is lost, the call that saw it fails and the next call
// connects again, starting a new process for a stdio server.
//
// A Client is safe for concurrent use; calls share one session.
type Client struct {
	srv  Server
	sdk  *mcpsdk.Client
	http *http.Client
	// ownsHTTP: http is ours, and its idle connections are closed with us.
	ownsHTTP bool

	mu      sync.Mutex
	session *mcpsdk.ClientSession // nil until connected, and after a loss
	closed  bool
	// closing counts the goroutines closing lost sessions.
	closing sync.WaitGroup

	// calls are the calls in flight on each session, which a question the
	// server asks during a call is put to (see elicit.go).
	callsMu sync.Mutex
	calls   map[*mcpsdk.ClientSession][]context.Context
}

// Connect connects to the server and initializes a session, so a server
// that cannot start or be reached is reported here rather than at the first
// call. Close the client when done.
func Connect(ctx context.Context, srv Server) (*Client, error) {
	if err := srv.validate(); err != nil {
		return nil, err
	}
	srv.applyDefaults()
	srv.Tools = cloneTools(srv.Tools)
	srv.Command = append([]string(nil), srv.Command...)
	srv.Env = append([]string(nil), srv.Env...)
	c := &Client{srv: srv}
	c.sdk = mcpsdk.NewClient(&mcpsdk.Implementation{Name: "belay", Version: version()},
		&mcpsdk.ClientOptions{ElicitationHandler: c.elicit})
	if srv.URL != "" {
		if srv.HTTPClient == nil {
			c.http = &http.Client{Transport: trackingRoundTripper{base: http.DefaultTransport.(*http.Transport).Clone()}}
			c.ownsHTTP = true
		} else {
			hc := *srv.HTTPClient
			base := hc.Transport
			if base == nil {
				base = http.DefaultTransport
			}
			hc.Transport = trackingRoundTripper{base: base}
			c.http = &hc
		}
	}
	if _, err := c.connected(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// Close ends the session (closing a stdio server's input and waiting up to
// ShutdownGrace for it to exit, then signalling it) and waits for lost
// sessions still being closed. How the server process exited is not an
// error of Close. Calls after Close fail with ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	cs := c.session
	c.session, c.closed = nil, true
	c.mu.Unlock()
	var err error
	if cs != nil {
		var exit *exec.ExitError
		if err = cs.Close(); err != nil && !errors.As(err, &exit) {
			err = fmt.Errorf("tools/mcp: close %s: %w", c.srv.Name, err)
		} else {
			err = nil
		}
	}
	c.closing.Wait()
	if c.ownsHTTP {
		c.http.CloseIdleConnections()
	}
	return err
}

// connected returns the live session, connecting first if there is none.
// Connecting holds the lock, so concurrent calls after a loss start one
// server, not one each.
func (c *Client) connected(ctx context.Context) (*mcpsdk.ClientSession, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if c.session != nil {
		return c.session, nil
	}
	cs, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.session = cs
	return cs, nil
}

// dial opens a new session with the server: for stdio, a new process.
func (c *Client) dial(ctx context.Context) (*mcpsdk.ClientSession, error) {
	var t mcpsdk.Transport
	if c.srv.URL != "" {
		// Belay reads no notifications, so it holds no event stream open.
		t = &mcpsdk.StreamableClientTransport{Endpoint: c.srv.URL, HTTPClient: c.http, DisableStandaloneSSE: true}
	} else {
		t = stdioTransport{&mcpsdk.CommandTransport{Command: c.srv.command(), TerminateDuration: c.srv.ShutdownGrace}}
	}
	// The session outlives the call that happens to open it: it keeps the
	// call's deadline for the handshake, but none of its values (the run,
	// its trace span).
	cctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	cs, err := c.sdk.Connect(cctx, t, nil)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", err, ctx.Err())
		}
		return nil, fmt.Errorf("tools/mcp: connect to %s: %w", c.srv.Name, err)
	}
	return cs, nil
}

// lost drops a session whose connection failed, so the next call connects
// again. The old session is closed on a goroutine of its own, which ends
// when the old server process has exited (closing its input, then SIGTERM
// and SIGKILL after the SDK's grace periods) or the HTTP session is
// deleted; Close waits for it.
func (c *Client) lost(cs *mcpsdk.ClientSession, cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session != cs {
		return // already replaced, or closed by Close
	}
	c.session = nil
	c.srv.Logger.Warn("MCP server connection lost; the next call reconnects", "server", c.srv.Name, "error", cause)
	c.closing.Go(func() { _ = cs.Close() })
}

// call calls the server's tool name. retrySafe says whether calling it
// twice is harmless (a read, or a tool that honours the key): then a call
// lost in flight is transient too.
func (c *Client) call(ctx context.Context, name string, retrySafe, alone bool, args json.RawMessage) (json.RawMessage, error) {
	if alone {
		return c.callAlone(ctx, name, retrySafe, args)
	}
	cs, err := c.connected(ctx)
	if err != nil {
		if ctx.Err() != nil || errors.Is(err, ErrClosed) {
			return nil, err
		}
		// Nothing was sent: calling again is safe whatever the tool does.
		return nil, belay.Transient(err)
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	params := &mcpsdk.CallToolParams{Name: name, Arguments: args, Meta: requestMeta(ctx)}
	d := &delivery{}
	defer c.inFlight(cs, ctx)()
	res, err := cs.CallTool(withDelivery(ctx, d), params)
	if err != nil {
		return nil, c.callError(ctx, cs, name, retrySafe, d, err)
	}
	return toolResult(res)
}

// callError sorts a failed call into what the runtime knows how to handle:
//   - the call's context ended: returned as is (the runtime makes a timeout
//     of it);
//   - the server answered with a JSON-RPC error, or refused the request
//     with a 400, 401 or 403 before running it: a plain error, for the
//     model to read (nothing was applied, and calling again as it is would
//     be refused again);
//   - the request never reached the server (no connection, a refused
//     connection, a dead pipe, a 429 or 503): transient;
//   - the connection was lost after the request may have reached the
//     server: transient if calling again is harmless, otherwise an unknown
//     outcome, which the runtime never retries blindly.
//
// A lost connection drops the session, so the next call reconnects.
func (c *Client) callError(ctx context.Context, cs *mcpsdk.ClientSession, name string, retrySafe bool, d *delivery, err error) error {
	if ctx.Err() != nil {
		return err
	}
	if answeredWithError(err) {
		return fmt.Errorf("%s: %w", name, err)
	}
	if status := d.rejectedWith(); status != 0 {
		err = fmt.Errorf("MCP server %s refused %s with HTTP %d before running it: %w", c.srv.Name, name, status, err)
		// The SDK fails the session on an error status it cannot read as
		// a JSON-RPC answer: the next call opens another.
		c.lost(cs, err)
		return err
	}
	err = fmt.Errorf("MCP server %s: %s: %w", c.srv.Name, name, err)
	if retryAfter, ok := d.serverBusy(); ok {
		return &belay.TransientError{Err: err, RetryAfter: retryAfter}
	}
	c.lost(cs, err)
	if !d.mayHaveArrived() || retrySafe {
		return belay.Transient(err)
	}
	return fmt.Errorf("%w: %w", belay.ErrUnknownOutcome, err)
}

// JSON-RPC codes the SDK uses for its own connection failures rather than
// for a server's answer.
const (
	codeClientClosing = -32003
	codeServerClosing = -32004
	codeRejected      = -32005
)

// answeredWithError reports whether err is a JSON-RPC error the server sent,
// as opposed to a failure of the connection.
func answeredWithError(err error) bool {
	if errors.Is(err, mcpsdk.ErrConnectionClosed) || errors.Is(err, mcpsdk.ErrSessionMissing) {
		return false
	}
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		return false
	}
	switch werr.Code {
	case codeClientClosing, codeServerClosing, codeRejected:
		return false
	}
	return true
}

func cloneTools(m map[string]ToolConfig) map[string]ToolConfig {
	out := make(map[string]ToolConfig, len(m))
	for k, v := range m {
		v.KeyFields = append([]string(nil), v.KeyFields...)
		out[k] = v
	}
	return out
}

// version is Belay's module version, for the client info sent to servers.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if bi.Main.Path == "github.com/belayrun/belay" && bi.Main.Version != "" {
		return bi.Main.Version
	}
	for _, dep := range bi.Deps {
		if dep.Path == "github.com/belayrun/belay" {
			return dep.Version
		}
	}
	return "devel"
}
