package mcp

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// delivery records how far one tools/call request got, so that a lost
// connection can be told apart from a lost answer: a request that never
// reached the server can be sent again whatever the tool does; one that
// may have reached it has an unknown outcome.
type delivery struct {
	mu sync.Mutex
	// attempted: the request was handed to the transport.
	attempted bool
	// refused: the transport proved that the server did not take the
	// request on: the connection was refused, the pipe had no reader, or
	// the server answered 404 for the session, 400, 401, 403, 429 or 503.
	refused bool
	// busy: the refusal was a 429 or 503, which leaves the session good.
	busy bool
	// retryAfter is the server's Retry-After with a 429 or 503.
	retryAfter time.Duration
	// rejected is the status of a 400, 401 or 403: the server judged the
	// request and refused it, which calling again does not change.
	rejected int
}

func (d *delivery) attempt() {
	d.mu.Lock()
	d.attempted = true
	d.mu.Unlock()
}

func (d *delivery) refuse() {
	d.mu.Lock()
	d.refused = true
	d.mu.Unlock()
}

func (d *delivery) refuseBusy(retryAfter time.Duration) {
	d.mu.Lock()
	d.refused, d.busy, d.retryAfter = true, true, retryAfter
	d.mu.Unlock()
}

func (d *delivery) reject(status int) {
	d.mu.Lock()
	d.refused, d.rejected = true, status
	d.mu.Unlock()
}

// rejectedWith reports the status of a 400, 401 or 403, or 0.
func (d *delivery) rejectedWith() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rejected
}

// mayHaveArrived reports whether the server may have received the request.
func (d *delivery) mayHaveArrived() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.attempted && !d.refused
}

// serverBusy reports a 429 or 503 and the server's Retry-After.
func (d *delivery) serverBusy() (time.Duration, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.retryAfter, d.busy
}

type deliveryKey struct{}

// withDelivery marks ctx as the context of one tools/call. The SDK passes
// the call's context down to the transport's Write, and over HTTP on to the
// request, which is where the transports below find it.
func withDelivery(ctx context.Context, d *delivery) context.Context {
	return context.WithValue(ctx, deliveryKey{}, d)
}

func deliveryFrom(ctx context.Context) *delivery {
	d, _ := ctx.Value(deliveryKey{}).(*delivery)
	return d
}

// stdioTransport runs the server command and tracks the delivery of tool
// calls written to its standard input.
type stdioTransport struct {
	inner *mcpsdk.CommandTransport
}

func (t stdioTransport) Connect(ctx context.Context) (mcpsdk.Connection, error) {
	conn, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return trackedConn{conn}, nil
}

type trackedConn struct {
	mcpsdk.Connection
}

func (c trackedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	d := deliveryFrom(ctx)
	if d == nil || !isToolCall(msg) {
		return c.Connection.Write(ctx, msg)
	}
	d.attempt()
	err := c.Connection.Write(ctx, msg)
	// A pipe without a reader takes nothing: the server is gone and did not
	// read the request.
	if errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed) {
		d.refuse()
	}
	return err
}

func isToolCall(msg jsonrpc.Message) bool {
	req, ok := msg.(*jsonrpc.Request)
	return ok && req.IsCall() && req.Method == "tools/call"
}

// trackingRoundTripper tracks the delivery of tool calls sent over HTTP.
type trackingRoundTripper struct {
	base http.RoundTripper
}

func (t trackingRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	d := deliveryFrom(req.Context())
	if d == nil || req.Method != http.MethodPost {
		return t.base.RoundTrip(req)
	}
	d.attempt()
	resp, err := t.base.RoundTrip(req)
	var op *net.OpError
	switch {
	case err != nil:
		if errors.As(err, &op) && op.Op == "dial" {
			d.refuse()
		}
	case resp.StatusCode == http.StatusTooManyRequests,
		resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") != "":
		// A 503 without Retry-After is no refusal: a proxy before a server
		// that died after reading the request answers so (Envoy's "reset
		// before headers"), and the call may have run.
		d.refuseBusy(parseRetryAfter(resp.Header.Get("Retry-After")))
	case resp.StatusCode == http.StatusNotFound && req.Header.Get("Mcp-Session-Id") != "":
		// The server no longer knows the session (it restarted): it
		// rejected the request without running it.
		d.refuse()
	case resp.StatusCode == http.StatusBadRequest, resp.StatusCode == http.StatusUnauthorized, resp.StatusCode == http.StatusForbidden:
		// Refused before anything ran: credentials or a request that an
		// authenticating proxy or the server's transport turned away. An
		// HTTP status is the transport's answer; a tool that ran answers
		// with a JSON-RPC result or error, even over an error status.
		d.reject(resp.StatusCode)
	}
	return resp, err
}

func (t trackingRoundTripper) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// parseRetryAfter reads a Retry-After in seconds; dates are ignored.
func parseRetryAfter(v string) time.Duration {
	s, err := strconv.Atoi(v)
	if err != nil || s < 0 {
		return 0
	}
	return time.Duration(s) * time.Second
}
