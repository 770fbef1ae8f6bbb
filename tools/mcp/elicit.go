package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/belayrun/belay"
)

// Elicitation: a server asks a question while one of its tools runs. The
// request names no call, so the client puts it to the call in flight on
// the session that carries it: the only one there (ToolConfig.Elicits gives
// a tool's calls sessions of their own). The question becomes a wait of the
// run through belay.Elicit, answered by the run's user or a person as the
// agent's Elicitations say, and the answer goes back to the server: accept
// with the content, decline, or cancel once the question expires.

// inFlight records that the call of ctx is in flight on cs until the
// returned function is called.
func (c *Client) inFlight(cs *mcpsdk.ClientSession, ctx context.Context) (done func()) {
	c.callsMu.Lock()
	defer c.callsMu.Unlock()
	if c.calls == nil {
		c.calls = map[*mcpsdk.ClientSession][]context.Context{}
	}
	c.calls[cs] = append(c.calls[cs], ctx)
	return func() {
		c.callsMu.Lock()
		defer c.callsMu.Unlock()
		calls := c.calls[cs]
		if i := slices.Index(calls, ctx); i >= 0 {
			calls = slices.Delete(calls, i, i+1)
		}
		if len(calls) == 0 {
			delete(c.calls, cs)
		} else {
			c.calls[cs] = calls
		}
	}
}

// askingCall returns the call a question on cs comes from.
func (c *Client) askingCall(cs *mcpsdk.ClientSession) (context.Context, error) {
	c.callsMu.Lock()
	defer c.callsMu.Unlock()
	switch calls := c.calls[cs]; len(calls) {
	case 1:
		return calls[0], nil
	case 0:
		return nil, errors.New("Belay answers a question only during a tool call, and none is in flight")
	default:
		return nil, fmt.Errorf("Belay cannot tell which of its %d calls in flight asks this question; "+
			"its operator marks the tool Elicits so each call has a session of its own", len(calls))
	}
}

// elicit answers a server's elicitation request.
func (c *Client) elicit(ctx context.Context, req *mcpsdk.ElicitRequest) (*mcpsdk.ElicitResult, error) {
	call, err := c.askingCall(req.Session)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	}
	if req.Params.Mode == "url" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "Belay answers form elicitations only"}
	}
	var schema json.RawMessage
	if req.Params.RequestedSchema != nil {
		if schema, err = json.Marshal(req.Params.RequestedSchema); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "requestedSchema: " + err.Error()}
		}
	}
	// The question lives as long as the call, and no longer than the
	// server's request for it.
	askCtx, cancel := context.WithCancel(call)
	defer cancel()
	defer context.AfterFunc(ctx, cancel)()
	a, err := belay.Elicit(askCtx, belay.Elicitation{Message: req.Params.Message, Schema: schema})
	switch {
	case errors.Is(err, belay.ErrNotInCall), errors.Is(err, belay.ErrWaitsUnsupported):
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	case err != nil:
		// The call ended, or the question could not be asked in the time
		// left: nobody answered.
		c.srv.Logger.Warn("MCP server's question not put to anyone", "server", c.srv.Name, "error", err)
		return &mcpsdk.ElicitResult{Action: string(belay.ElicitCancel)}, nil
	}
	res := &mcpsdk.ElicitResult{Action: string(a.Action)}
	if a.Action == belay.ElicitAccept && len(a.Content) > 0 {
		if err := json.Unmarshal(a.Content, &res.Content); err != nil {
			return nil, fmt.Errorf("tools/mcp: the answer's content: %w", err)
		}
	}
	return res, nil
}

// callAlone makes a call on a session of its own, closed after it, so a
// question the server asks during it is known to come from it.
func (c *Client) callAlone(ctx context.Context, name string, retrySafe bool, args json.RawMessage) (json.RawMessage, error) {
	// Close waits for the call and its session, as for a lost session's.
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, ErrClosed
	}
	c.closing.Add(1)
	c.mu.Unlock()
	defer c.closing.Done()
	cs, err := c.dial(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, belay.Transient(err)
	}
	defer func() { _ = cs.Close() }()
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	params := &mcpsdk.CallToolParams{Name: name, Arguments: args, Meta: requestMeta(ctx)}
	d := &delivery{}
	defer c.inFlight(cs, ctx)()
	res, err := cs.CallTool(withDelivery(ctx, d), params)
	if err != nil {
		// The session is never the shared one, so callError does not
		// drop that; this one is closed on return whatever happened.
		return nil, c.callError(ctx, cs, name, retrySafe, d, err)
	}
	return toolResult(res)
}
