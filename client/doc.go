// Package client is a Go client of Belay's HTTP API: typed calls for every
// route under /v1, as GET /v1/openapi.json describes them. It depends on
// the standard library alone.
//
// # Calls
//
// A Client is made with the server's URL and an API key of one tenant
// (belay keys create prints one); what it may do is what the key's roles
// allow. Every call takes a context, which bounds it, its retries and its
// streams.
//
// # Retries
//
// A call is retried only where the server's contract makes it safe: reads
// (GET) and the kill switch (PUT) after a dropped connection or a 5xx, and
// run creation, whose Idempotency-Key is kept across the retries of one call
// so that every attempt names the same run, after those and after 409
// request_in_flight. Decisions, cancels and the other POSTs are sent once,
// but a connection that could not be made at all is tried again, since the
// request never left. The wait before a retry is a random time up to an
// exponential bound (full jitter), at least what a Retry-After asks.
//
// # Errors
//
// The server answers every error with a stable code. The client returns it
// as an *Error, which errors.Is matches against the code's sentinel:
//
//	if errors.Is(err, client.ErrAlreadyDecided) { ... }
//
// # Lists and streams
//
// Runs pages through the runs with an iterator; Trace reads a run's trace
// line by line. Events follows a run's events live over Server-Sent Events
// and resumes by itself with Last-Event-ID after a dropped connection,
// until the run ends.
package client
