package server

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"time"
)

// The request log is one line per request, written when its response
// ends: the method, the route's pattern (/v1/runs/{id}: the ids in a path
// name a customer's runs and stay out), the status, the duration, the
// tenant of the key or session that signed the request, and a request id.
// Nothing the request carries is written: no key, cookie, query or body.

// requestIDHeader carries a request's id: taken from a proxy that set one,
// made up otherwise, and always sent back, so a client's report and the
// log meet.
const requestIDHeader = "X-Request-Id"

// requestIDPattern is what an id from outside must look like to be logged
// as it is: a header is the client's text, and a log line is no place for
// arbitrary text.
var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// requestNote is what the handlers learn about a request that its log
// line reports: the tenant, once a key or a session is verified. The
// console's live stream verifies its session again from the goroutine that
// serves it, so the note is safe for concurrent use.
type requestNote struct {
	tenant atomic.Pointer[string]
}

type requestNoteKey struct{}

// noteTenant records the tenant a request acts for, for its log line.
func noteTenant(ctx context.Context, tenant string) {
	if n, ok := ctx.Value(requestNoteKey{}).(*requestNote); ok {
		n.tenant.Store(&tenant)
	}
}

// logRequests writes the request log of next at info level, and of the
// routes in quiet (/healthz, /readyz, /metrics), which a load balancer or
// a scraper asks every few seconds, at debug level. mux names each
// request's route.
func logRequests(logger *slog.Logger, mux *http.ServeMux, quiet map[string]bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(requestIDHeader)
		if !requestIDPattern.MatchString(id) {
			id = "req_" + randomHex(8)
		}
		w.Header().Set(requestIDHeader, id)
		_, pattern := mux.Handler(r)
		note := &requestNote{}
		rec := &statusRecorder{ResponseWriter: w}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), requestNoteKey{}, note)))

		level := slog.LevelInfo
		if quiet[pattern] {
			level = slog.LevelDebug
		}
		if !logger.Enabled(r.Context(), level) {
			return
		}
		tenant := ""
		if t := note.tenant.Load(); t != nil {
			tenant = *t
		}
		logger.LogAttrs(r.Context(), level, "request",
			slog.String("method", r.Method),
			slog.String("route", route(pattern)),
			slog.Int("status", rec.status()),
			slog.Duration("duration", time.Since(start)),
			slog.String("tenant", tenant),
			slog.String("request_id", id))
	})
}

// route is a mux pattern without its method: "GET /v1/runs/{id}" is
// /v1/runs/{id}. A request no route matched (a redirect to a cleaned
// path) has none.
func route(pattern string) string {
	if method, path, ok := strings.Cut(pattern, " "); ok && !strings.HasPrefix(method, "/") {
		return path
	}
	if pattern == "" {
		return "-"
	}
	return pattern
}

// statusRecorder keeps the status a handler answered with. It flushes for
// the live streams, and unwraps for http.ResponseController, which sets
// the read deadline of a request body.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.code == 0 && code >= 200 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// FlushError is what http.ResponseController calls: a stream learns from
// its error that the client is gone.
func (w *statusRecorder) FlushError() error {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Flush is for handlers that ask for an http.Flusher.
func (w *statusRecorder) Flush() { _ = w.FlushError() }

func (w *statusRecorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// status is the answered status; a handler that wrote nothing answered 200.
func (w *statusRecorder) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}
