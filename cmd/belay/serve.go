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
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/config"
	"github.com/belayrun/belay/metrics"
	"github.com/belayrun/belay/server"
	"github.com/belayrun/belay/slack"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/tracing"
	"github.com/belayrun/belay/webhook"
)

const serveUsage = `usage: belay serve [--db PATH | --database-url URL] [--addr HOST:PORT] [--config FILE] [flags]

Runs workers for the support agent, or the agents of --config FILE, with the
HTTP API (/v1/), the approval console (/console/) and /metrics, until SIGTERM
or SIGINT; then each step in flight finishes and its lease is released, so
another worker takes the run over at once. Creates the store if it does not
exist. Several serve processes may share one store.

Each setting is taken from its flag, else from its environment variable,
else from its key under serve: in the --config file, else its default; the
variable and the key follow each flag below, in brackets. The models of
--config read their keys from ANTHROPIC_API_KEY and OPENAI_API_KEY, and
traces are exported by OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set (with
the other OTEL_EXPORTER_OTLP_ variables). Logs go to stderr: a line per
request, and a line when a run is created, claimed, waits, ends or is
released, at info level.`

// httpShutdownTimeout is how long open requests get to finish once the
// workers have stopped: a stop takes up to --grace and this, and a
// deployment's grace period must be longer (deploy/ holds it to that).
const httpShutdownTimeout = 10 * time.Second

// runServe runs workers for the support-desk agent, or the agents of a
// configuration file, with the HTTP API, the approval console and the
// webhook sender, until SIGTERM or SIGINT, then stops gracefully: each run
// in flight finishes its step, checkpoints and releases its lease, so
// another worker takes it over at once. Several serve processes may share
// one store.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	set, err := parseServe(args, stdout, os.Getenv)
	if err != nil {
		return err
	}
	db := set.db
	logger := set.logger(stderr)
	logger.LogAttrs(ctx, slog.LevelInfo, "settings", set.attrs()...)
	st, err := db.openAccess(ctx, accessCreate)
	if err != nil {
		return err
	}
	defer st.Close()
	var agents []*belay.Agent
	if set.file != nil {
		var closeMCP func() error
		// The requirements that read a run's effects read them here.
		agents, closeMCP, err = set.file.BuildWith(ctx, config.BuildParams{Models: buildModel, Effects: st})
		if err != nil {
			return err
		}
		defer closeMCP()
	} else {
		world, agent, err := openSupport(ctx, "serve", db, set.world, set.policy)
		if err != nil {
			return err
		}
		defer world.Close()
		if err := world.Seed(ctx); err != nil {
			return err
		}
		agents = []*belay.Agent{agent}
	}
	if err := set.slow.apply(agents[0], stdout); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		metrics.NewStoreCollector(st))
	// The event streams' hub sees this process's events as they commit.
	events := server.NewEventHub(st, 0, logger)
	observers := observers{metrics.New(reg), events, runLog{logger}}
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
		// The exporter reads the endpoint and headers from the standard
		// OTEL_EXPORTER_OTLP_* variables.
		exp, err := otlptracehttp.New(ctx)
		if err != nil {
			return fmt.Errorf("serve: OTLP exporter: %w", err)
		}
		spans := tracing.NewExporter(sdktrace.NewBatchSpanProcessor(exp))
		defer spans.Shutdown(context.WithoutCancel(ctx))
		observers = append(observers, spans)
	}
	rt, err := belay.New(belay.Config{Store: st, Agents: agents, Workers: set.workers,
		LeaseTTL: set.leaseTTL, HumanApproval: true, Logger: logger, Observer: observers, KeepEnded: set.keep})
	if err != nil {
		return err
	}
	if set.file != nil {
		// The file's schedules, added again at each start: one whose spec
		// is unchanged keeps its next firing.
		for _, req := range set.file.ScheduleRequests() {
			if _, err := rt.Operator().AddSchedule(ctx, req); err != nil {
				return fmt.Errorf("serve: %w", err)
			}
		}
	}
	ln, err := net.Listen("tcp", set.addr)
	if err != nil {
		return fmt.Errorf("serve: listen on %s: %w (pass --addr to choose another)", set.addr, err)
	}
	base := set.publicURL
	if base == "" {
		base = "http://" + ln.Addr().String()
	}
	operational := map[string]http.Handler{"GET /metrics": promhttp.HandlerFor(reg, promhttp.HandlerOpts{})}
	var deliverers map[string]webhook.Deliverer
	if set.slack != "" {
		app, err := openSlack(ctx, set.slack, rt, st, base, logger)
		if err != nil {
			return err
		}
		// Slack authenticates its requests by their signature, not by a key.
		operational["POST /slack/interactivity"] = app
		deliverers = map[string]webhook.Deliverer{slack.Scheme: app}
	}
	api, err := server.New(server.Config{Runtime: rt, Store: st, Logger: logger, Events: events, SecureCookies: set.secureCookies,
		AllowPrivateWebhooks: set.allowPrivateWebhooks, BodyTimeout: set.bodyTimeout, Operational: operational})
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
		shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpShutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(shutCtx)
	}()
	sender := webhook.New(st, webhook.Options{Logger: logger, ConsoleURL: base, AllowPrivateDestinations: set.allowPrivateWebhooks,
		Deliverers: deliverers})
	senderDone := make(chan error, 1)
	go func() { senderDone <- sender.Run(ctx) }()
	// The runtime outlives ctx (the signal) by the grace period, so steps
	// in flight can finish and checkpoint.
	if err := rt.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "belay serve: %d workers on %s (owner %s), listening on %s; console %s/console/, API %s/v1/, metrics %s/metrics; SIGTERM stops gracefully\n",
		set.workers, db.Name(), rt.Owner(), ln.Addr(), base, base, base)
	if ok, err := server.HasKeys(ctx, st); err == nil && !ok {
		fmt.Fprintf(stdout, "belay serve: no API keys yet; create one to sign in:\n  belay keys create --tenant acme --role approver --role operator --name you@example.com %s\n", db)
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), set.grace)
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

// openSlack builds the Slack app of belay serve --slack FILE and registers
// the webhooks that carry each configured tenant's approval requests to
// its channel.
func openSlack(ctx context.Context, path string, rt *belay.Runtime, st store.AccessStore, consoleURL string, logger *slog.Logger) (*slack.App, error) {
	cfg, err := slack.LoadConfig(path)
	if err != nil {
		return nil, fmt.Errorf("serve: --slack: %w", err)
	}
	app, err := slack.NewFromEnv(slack.Options{Runtime: rt, Store: st, Config: cfg, ConsoleURL: consoleURL, Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("serve: --slack: %w", err)
	}
	if err := app.EnsureWebhooks(ctx, time.Now()); err != nil {
		return nil, fmt.Errorf("serve: --slack: %w", err)
	}
	return app, nil
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
