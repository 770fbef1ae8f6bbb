// Package server is Belay's HTTP face: the JSON API under /v1, the approval
// console under /console, and the operational endpoints. Every /v1 call
// carries an API key of one tenant; the console signs in with a key and
// keeps a session cookie. A tenant never sees another tenant's runs,
// approvals or effects: they answer 404, as ids that do not exist do.
package server

import (
	"context"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// Config configures a Server.
type Config struct {
	// Runtime runs the agents; its store must be Store. Required.
	Runtime *belay.Runtime
	// Store is the runtime's store. Required.
	Store store.AccessStore
	// Logger receives request errors, and a line per request at info level;
	// the probes and the GET routes of Operational (a scrape of /metrics)
	// at debug. Default: discard.
	Logger *slog.Logger
	// SecureCookies marks the session cookie Secure even when the request
	// did not arrive over TLS (a proxy terminates it). Requests over TLS
	// always get Secure cookies.
	SecureCookies bool
	// SessionTTL is how long a console session lasts. Default 12 h.
	SessionTTL time.Duration
	// MaxBody bounds a request body. Default 1 MiB.
	MaxBody int64
	// BodyTimeout bounds how long a request body may take to arrive,
	// counted from the end of its headers; a body still arriving then is
	// answered 408 and its connection closed. A request without a body,
	// such as the console's live stream, is not bounded. Default 10 s.
	BodyTimeout time.Duration
	// LivePoll is how often a live console view looks for changes.
	// Default 500 ms.
	LivePoll time.Duration
	// Operational holds routes served without authentication next to the
	// API (/metrics); /healthz and /readyz are the server's own.
	Operational map[string]http.Handler
	// Events wakes the live event streams (GET /v1/runs/{id}/events) when
	// a run's trace grows. Pass the same hub to the runtime as (one of) its
	// Observer, so that a stream sees this process's events at once.
	// Default: a hub of the server's own, which finds every event by its
	// poll alone, up to DefaultEventPoll late.
	Events *EventHub
	// AllowPrivateWebhooks accepts webhook URLs whose host is an IP
	// address that is not public (loopback, private, link-local, ...).
	// Default false: such a URL is refused with 400. Host names are checked
	// by the sender when it connects (webhook.Options.AllowPrivateDestinations).
	AllowPrivateWebhooks bool

	now func() time.Time
	// keepalive is how long an event stream stays silent; tests shorten it.
	keepalive time.Duration
}

// Server serves the API and the console.
type Server struct {
	cfg     Config
	rt      *belay.Runtime
	st      store.AccessStore
	handler http.Handler
	tmpl    *template.Template
	hub     *EventHub

	mu       sync.Mutex
	inFlight map[string]bool

	// closing ends live streams, so that an HTTP shutdown is not held up by
	// a console tab left open.
	closing   chan struct{}
	closeOnce sync.Once

	// beforeCreate, if set, runs while a run creation is in flight (tests).
	beforeCreate func()
}

// New builds a server.
func New(cfg Config) (*Server, error) {
	if cfg.Runtime == nil || cfg.Store == nil {
		return nil, errors.New("server: Runtime and Store are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = 12 * time.Hour
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 1 << 20
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 10 * time.Second
	}
	if cfg.LivePoll <= 0 {
		cfg.LivePoll = 500 * time.Millisecond
	}
	if cfg.now == nil {
		cfg.now = time.Now
	}
	if cfg.keepalive <= 0 {
		cfg.keepalive = DefaultKeepalive
	}
	if cfg.Events == nil {
		cfg.Events = NewEventHub(cfg.Store, 0, cfg.Logger)
	}
	s := &Server{cfg: cfg, rt: cfg.Runtime, st: cfg.Store, hub: cfg.Events, inFlight: map[string]bool{}, closing: make(chan struct{})}
	console, err := s.consoleRoutes()
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	s.apiRoutes(mux)
	for pattern, h := range console {
		mux.Handle(pattern, h)
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", s.readyz)
	quiet := map[string]bool{"GET /healthz": true, "GET /readyz": true}
	for pattern, h := range cfg.Operational {
		mux.Handle(pattern, h)
		quiet[pattern] = strings.HasPrefix(pattern, "GET ")
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			http.Redirect(w, r, "/console/", http.StatusSeeOther)
			return
		}
		writeError(w, errNotFound("no such endpoint: "+r.Method+" "+r.URL.Path))
	})
	// A browser never gets to change state from another origin: unsafe
	// methods carrying cross-site Sec-Fetch-Site or a foreign Origin are
	// refused before any handler runs. API clients send neither header.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusForbidden, Code: "cross_origin",
			Message: "cross-origin requests that change state are refused; use the console on its own origin, or an API client"})
	}))
	s.handler = logRequests(cfg.Logger, mux, quiet, s.limitBodyTime(securityHeaders(cop.Handler(mux))))
	return s, nil
}

// CloseLive ends the console's live streams and the API's event streams;
// pages and clients reconnect to another server, or retry. Register it with http.Server.RegisterOnShutdown, since
// a shutdown waits for every open request.
func (s *Server) CloseLive() {
	s.closeOnce.Do(func() { close(s.closing) })
}

// ServeHTTP serves a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, r)
}

// readyz fails while the store cannot take writes: it does not answer, or
// it found its file damaged and writes nothing more (the server would
// answer every run with an error). A load balancer then sends requests to
// another server, and an operator learns what to do from the message; the
// file's name and SQLite's words go to the log, not to whoever asks.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if hc, ok := s.st.(store.HealthChecker); ok {
		if err := hc.Health(ctx); err != nil {
			s.cfg.Logger.Error("store not ready", "err", err)
			if errors.Is(err, store.ErrCorrupt) {
				writeError(w, errStoreCorrupt)
				return
			}
			writeError(w, &apiError{status: http.StatusServiceUnavailable, Code: "store_unavailable",
				Message: "the database cannot take writes; the server's log says why"})
			return
		}
	}
	if _, _, err := s.st.KillSwitch(ctx, ""); err != nil {
		writeError(w, &apiError{status: http.StatusServiceUnavailable, Code: "store_unavailable",
			Message: "the database does not answer; check its logs and the server's --db / --database-url"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		next.ServeHTTP(w, r)
	})
}

// HasKeys reports whether any API key exists, so a first start can say how
// to create one.
func HasKeys(ctx context.Context, st store.AccessStore) (bool, error) {
	keys, err := st.APIKeys(ctx, "")
	if err != nil {
		return false, err
	}
	return len(keys) > 0, nil
}
