package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/config"
	"github.com/belayrun/belay/metrics"
	"github.com/belayrun/belay/server"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/tracing"
	"github.com/belayrun/belay/webhook"
)

const serveUsage = `usage: belay serve [--db PATH | --database-url URL] [--addr HOST:PORT] [--config FILE] [flags]

Runs workers for the support agent, or the agents of --config FILE, with the
HTTP API (/v1/), the approval console (/console/) and /metrics, until SIGTERM
or SIGINT; then each step in flight finishes and its lease is released, so
another worker takes the run over at once. Creates the store if it does not
exist. Several serve processes may share one store.`

// runServe runs workers for the support-desk agent, or the agents of a
// configuration file, with the HTTP API, the approval console and the
// webhook sender, until SIGTERM or SIGINT, then stops gracefully: each run
// in flight finishes its step, checkpoints and releases its lease, so
// another worker takes it over at once. Several serve processes may share
// one store.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("serve", serveUsage, stdout)
	db := dbFlag(fs)
	worldPath := fs.String("world", "", "path of the support world's database (default: DB + .world)")
	workers := fs.Int("workers", 16, "runs executed at once")
	leaseTTL := fs.Duration("lease-ttl", 30*time.Second, "lease time-to-live")
	grace := fs.Duration("grace", 30*time.Second, "how long a shutdown waits for steps in flight")
	policyPath := fs.String("policy", "", "approval policy file (YAML or JSON) instead of the support desk's")
	addr := fs.String("addr", "127.0.0.1:8080", "address of the API, the console and /metrics")
	publicURL := fs.String("public-url", "", "URL people reach the console at, for links in notifications (default http://ADDR)")
	secureCookies := fs.Bool("secure-cookies", false, "mark session cookies Secure (set it when a TLS proxy fronts the server)")
	allowPrivateWebhooks := fs.Bool("allow-private-webhooks", false,
		"let webhooks reach loopback, private, link-local and other non-public addresses, for development and tests; "+
			"by default such URLs are refused at registration and deliveries to them fail")
	bodyTimeout := fs.Duration("body-timeout", 10*time.Second,
		"how long a request body may take to arrive after its headers; a slower one is answered 408 and its connection closed")
	configPath := fs.String("config", "", "agents from a file (models, instructions, MCP servers, policy, budget) instead of the support desk")
	slow := slowToolFlag(fs.FlagSet)
	keepEnded := fs.String("keep-ended", "", "delete runs that ended longer ago than this, with all they own: 90d, 720h (default: keep every run)")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	if *bodyTimeout <= 0 {
		return usageError{"serve: --body-timeout must be positive, like 10s"}
	}
	var keep time.Duration
	if *keepEnded != "" {
		k, err := parseAge(*keepEnded)
		if err != nil {
			return usageError{"serve: --keep-ended: " + err.Error()}
		}
		keep = k
	}
	st, err := db.openAccess(ctx, accessCreate)
	if err != nil {
		return err
	}
	defer st.Close()
	var agents []*belay.Agent
	if *configPath != "" {
		f, err := config.Load(*configPath)
		if err != nil {
			return err
		}
		var closeMCP func() error
		// The requirements that read a run's effects read them here.
		agents, closeMCP, err = f.BuildWith(ctx, config.BuildParams{Models: buildModel, Effects: st})
		if err != nil {
			return err
		}
		defer closeMCP()
	} else {
		world, agent, err := openSupport(ctx, "serve", db, *worldPath, *policyPath)
		if err != nil {
			return err
		}
		defer world.Close()
		if err := world.Seed(ctx); err != nil {
			return err
		}
		agents = []*belay.Agent{agent}
	}
	if err := slow.apply(agents[0], stdout); err != nil {
		return err
	}
	logger := slog.New(slog.NewJSONHandler(stderr, nil))
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		metrics.NewStoreCollector(st))
	observers := observers{metrics.New(reg)}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
		// The endpoint and headers are the standard OTEL_EXPORTER_OTLP_*
		// variables'; OTLP over HTTP, without gRPC.
		cfg, err := tracing.OTLPConfigFromEnv(os.Getenv)
		if err != nil {
			return usageError{"serve: " + err.Error()}
		}
		exp, err := tracing.NewOTLPExporter(ctx, cfg)
		if err != nil {
			return fmt.Errorf("serve: OTLP exporter: %w", err)
		}
		spans := tracing.NewExporter(sdktrace.NewBatchSpanProcessor(exp))
		defer spans.Shutdown(context.WithoutCancel(ctx))
		observers = append(observers, spans)
	}
	rt, err := belay.New(belay.Config{Store: st, Agents: agents, Workers: *workers,
		LeaseTTL: *leaseTTL, HumanApproval: true, Logger: logger, Observer: observers, KeepEnded: keep})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("serve: listen on %s: %w (pass --addr to choose another)", *addr, err)
	}
	base := *publicURL
	if base == "" {
		base = "http://" + ln.Addr().String()
	}
	api, err := server.New(server.Config{Runtime: rt, Store: st, Logger: logger, SecureCookies: *secureCookies,
		AllowPrivateWebhooks: *allowPrivateWebhooks, BodyTimeout: *bodyTimeout,
		Operational: map[string]http.Handler{"GET /metrics": promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}})
	if err != nil {
		return err
	}
	// Headers are bounded here and bodies by the server's BodyTimeout; a
	// WriteTimeout would cut the console's live streams.
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	srv.RegisterOnShutdown(api.CloseLive)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http", "err", err)
		}
	}()
	defer func() {
		shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutCtx)
	}()
	sender := webhook.New(st, webhook.Options{Logger: logger, ConsoleURL: base, AllowPrivateDestinations: *allowPrivateWebhooks})
	senderDone := make(chan error, 1)
	go func() { senderDone <- sender.Run(ctx) }()
	// The runtime outlives ctx (the signal) by the grace period, so steps
	// in flight can finish and checkpoint.
	if err := rt.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "belay serve: %d workers on %s (owner %s); console %s/console/, API %s/v1/, metrics %s/metrics; SIGTERM stops gracefully\n",
		*workers, db.Name(), rt.Owner(), base, base, base)
	if ok, err := server.HasKeys(ctx, st); err == nil && !ok {
		fmt.Fprintf(stdout, "belay serve: no API keys yet; create one to sign in:\n  belay keys create --tenant acme --role approver --role operator --name you@example.com %s\n", db)
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	if err := rt.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	if err := <-senderDone; err != nil {
		logger.Error("webhook sender", "err", err)
	}
	fmt.Fprintln(stdout, "belay serve: stopped; leases released")
	return nil
}

// observers sends each observation to all of them.
type observers []belay.Observer

func (o observers) Event(run belay.ObservedRun, ev store.Event) {
	for _, x := range o {
		x.Event(run, ev)
	}
}

func (o observers) Checkpoint(run belay.ObservedRun, d time.Duration) {
	for _, x := range o {
		x.Checkpoint(run, d)
	}
}
