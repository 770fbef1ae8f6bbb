// Package mcp exposes the tools of MCP servers as Belay tools, on the
// official MCP Go SDK.
//
// Connect reaches a server over stdio (Server.Command: Belay starts the
// process) or streamable HTTP (Server.URL); Client.Tools lists its tools as
// belay.Tool values, ready for an agent:
//
//	c, err := mcp.Connect(ctx, mcp.Server{Name: "files", Command: []string{"mcp-server-files", "/srv/data"}})
//	if err != nil { ... }
//	defer c.Close()
//	tools, err := c.Tools(ctx)
//
// # Effect classes
//
// A tool's effect class decides how Belay treats its calls: reads run
// freely; writes and irreversible calls go through the idempotency ledger,
// and irreversible ones through the approval gate. Configuration
// (Server.Tools) says it first; otherwise the tool's MCP annotations do, as
// EffectOf sets out: readOnlyHint true is Read, destructiveHint false is
// Write, and everything else, no annotations included, is Irreversible.
// That is the MCP specification's own default for a tool that is not
// read-only, and it keeps a tool nobody described behind the gate.
// idempotentHint true makes the tool HonorsKey: a call whose outcome was lost
// may be made again. Annotations are the server's claims about itself; for a
// server you do not trust, set Server.IgnoreAnnotations.
//
// # Tool names
//
// Model providers accept tool names of 1 to 64 letters, digits, "_" and
// "-"; MCP allows more ("files.read", "github/create_issue"). Client.Tools
// keeps a name providers accept and rewrites another, each character they
// refuse made "_"; two names that rewrite alike, or one longer than 64,
// end in "_" and 8 hex digits of a hash of the whole name instead, so no
// two tools share a name. The Belay tool calls the server's tool by its own
// name. The rewriting depends only on the names the server lists, so an
// agent's version, and the runs resumed on it, hold across restarts.
// Policies and Server.Tools name tools as Belay and the server do:
// policies by the rewritten name, Server.Tools by the server's.
//
// # Trace context and idempotency keys
//
// Every tools/call carries in its _meta the W3C trace context of the step
// making it (traceparent, and tracestate when there is one): the
// OpenTelemetry span in the call's context if there is one, otherwise one
// derived from the run (trace id) and the step and tool_use (span id), the
// same for every attempt of the call. A side-effecting call also carries its
// idempotency key as belay/idempotency_key.
//
// # Failures and restarts
//
// A server's tool error (isError) and a JSON-RPC error are returned to the
// model. A lost connection (the process exited, the network dropped) fails
// the call and drops the session; the next call connects again, starting a
// new process for a stdio server. The failed call is a belay.TransientError,
// which the runtime retries, when the request never reached the server or
// calling again is harmless (Read or HonorsKey); otherwise its outcome is
// unknown (it wraps belay.ErrUnknownOutcome) and the runtime resolves it
// without calling blindly again (a request written over HTTP to a kept-alive
// connection just as the server closed it counts as one that may have
// arrived). A 429 or 503 is transient and keeps the session, with the
// server's Retry-After. A 400, 401 or 403 is the server (or a proxy before
// it) refusing the request before running it: a plain error for the model,
// whatever the tool, and the next call opens a new session. A server that
// hangs without dying is not restarted: its calls time out.
//
// # Questions during a call (elicitation)
//
// A server may ask a question while its tool runs (elicitation/create, form
// mode). Belay puts it to the run whose call is in flight, through
// belay.Elicit: a durable wait of the run, answered by a person of the
// approver role or, if the agent's Elicitations say so, by the run's user,
// as any other question is, from any process (Operator.PostResult, POST
// /v1/runs/{id}/results/{call}; Operator.Say, POST /v1/runs/{id}/messages).
// An answer that does not fit the requested schema is refused to whoever
// sent it, with what the form takes. The server gets accept with the
// content, decline, or cancel once the question expires, which it does a
// little before the call's timeout (ToolConfig.Timeout): give a tool that
// asks people the time they take. The call keeps its run's lease while it
// waits; if the worker dies, the call is lost like any call in flight (a
// read is called again, a side effect's outcome is unknown and settled
// without calling blindly), and a call made again that asks the same
// question gets the first wait, answered or not, so nobody is asked twice.
//
// The request names no call, so Belay answers it only when it knows the
// call: mark a tool that asks with ToolConfig.Elicits, which gives each of
// its calls a session of its own (for stdio, a process). A question that
// comes while several calls share the session, or none is in flight, gets
// an error.
//
// # Goroutines and processes
//
// A session runs one goroutine of the SDK's, reading the connection, and
// for stdio the server process (Belay holds no event stream open over HTTP:
// it reads no notifications). They end when the session is closed: by
// Client.Close, or, for a lost session, by a goroutine the client starts to
// close it, which ends once the old process has exited (its input closed,
// then SIGTERM, then SIGKILL, after the SDK's grace periods of 5 seconds
// each) or the HTTP session is deleted. Client.Close waits for those
// goroutines, so after Close returns no process or goroutine of the client
// is left.
//
// A stdio server does not inherit Belay's environment, only the few
// variables a program needs and Server.Env, so model API keys do not reach
// it.
package mcp
