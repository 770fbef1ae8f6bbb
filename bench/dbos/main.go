// Command dbos runs the run shape of `belay bench` on DBOS Transact Go, so
// that the two can be compared side by side on one machine: N workflows of
// K no-op durable steps (dbos.RunAsStep), C of them at once, on DBOS's
// SQLite system database or on PostgreSQL.
//
// It is a module of its own, so that Belay's module never builds it and
// never requires DBOS:
//
//	cd bench/dbos && go run . --runs 2000
//	cd bench/dbos && go run . --store postgres --database-url postgres://postgres@127.0.0.1:5432/test --runs 2000
//
// What is timed, and how it differs from belay bench, is said on runBench.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"sync/atomic"
)

const usage = `usage: dbos [--store sqlite|postgres] [--database-url URL] [--runs N] [--steps K] [--concurrency C] [--json]

Runs N DBOS workflows of K no-op durable steps each (dbos.RunAsStep), C at
once, and reports durable steps per second and the overhead of a step: the
time dbos.RunAsStep takes beyond the step's own function. The same run shape
as belay bench, for a side-by-side comparison.

`

type config struct {
	runs, steps, concurrency int
	store                    string
	url                      string
}

// result is what --json prints. Its fields have the names belay bench
// --json gives the fields that mean the same.
type result struct {
	System         string  `json:"system"`
	Version        string  `json:"version"`
	Runs           int     `json:"runs"`
	StepsPerRun    int     `json:"steps_per_run"`
	Concurrency    int     `json:"concurrency"`
	Store          string  `json:"store"`
	Steps          int     `json:"steps"`
	Seconds        float64 `json:"seconds"`
	StepsPerSec    float64 `json:"steps_per_sec"`
	OverheadP50MS  float64 `json:"overhead_p50_ms"`
	OverheadP99MS  float64 `json:"overhead_p99_ms"`
	DBBytesPerStep float64 `json:"db_bytes_per_step"`
	PeakRSSMB      float64 `json:"peak_rss_mb"`
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "dbos:", err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("dbos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	var cfg config
	fs.StringVar(&cfg.store, "store", "sqlite", "system database: sqlite (a temporary file, removed after), or postgres (with --database-url)")
	fs.StringVar(&cfg.url, "database-url", os.Getenv("BELAY_DATABASE_URL"), "PostgreSQL URL for --store postgres; DBOS gets a schema of its own, dropped after")
	fs.IntVar(&cfg.runs, "runs", 200, "number of workflows")
	fs.IntVar(&cfg.steps, "steps", 8, "durable steps per workflow")
	fs.IntVar(&cfg.concurrency, "concurrency", 64, "workflows executed at once")
	asJSON := fs.Bool("json", false, "print the figures as one JSON object")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if cfg.runs < 1 || cfg.steps < 1 || cfg.concurrency < 1 {
		return errors.New("--runs, --steps and --concurrency must be at least 1")
	}
	switch cfg.store {
	case "sqlite":
	case "postgres":
		if cfg.url == "" {
			return errors.New("--store postgres needs --database-url (or $BELAY_DATABASE_URL)")
		}
	default:
		return fmt.Errorf("unknown store %q (want sqlite or postgres)", cfg.store)
	}

	// DBOS logs at Info by default, a line or more a workflow; belay bench
	// logs warnings only, and so does this.
	log := newQuietable(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	res, err := runBench(ctx, cfg, log)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	res.print(stdout)
	return nil
}

// quietable is a log handler that can be silenced: DBOS's queue runner
// warns that its context was canceled when DBOS shuts down, which says
// nothing about the bench.
type quietable struct {
	slog.Handler
	quiet *atomic.Bool
}

func newQuietable(h slog.Handler) quietable { return quietable{Handler: h, quiet: new(atomic.Bool)} }

func (h quietable) Enabled(ctx context.Context, l slog.Level) bool {
	return !h.quiet.Load() && h.Handler.Enabled(ctx, l)
}

func (h quietable) WithAttrs(attrs []slog.Attr) slog.Handler {
	return quietable{Handler: h.Handler.WithAttrs(attrs), quiet: h.quiet}
}

func (h quietable) WithGroup(name string) slog.Handler {
	return quietable{Handler: h.Handler.WithGroup(name), quiet: h.quiet}
}

func (r result) print(w io.Writer) {
	fmt.Fprintf(w, "DBOS Transact Go %s: %d workflows x %d steps, concurrency %d, store %s\n\n", r.Version, r.Runs, r.StepsPerRun, r.Concurrency, r.Store)
	fmt.Fprintf(w, "  durable steps      %d\n", r.Steps)
	fmt.Fprintf(w, "  wall time          %.3f s (starting each workflow is timed: see runBench)\n", r.Seconds)
	fmt.Fprintf(w, "  throughput         %.1f durable steps/s\n", r.StepsPerSec)
	fmt.Fprintf(w, "  overhead per step  p50 %.3f ms, p99 %.3f ms (RunAsStep's time minus the step function's)\n", r.OverheadP50MS, r.OverheadP99MS)
	fmt.Fprintf(w, "  bytes per step     %.0f of database\n", r.DBBytesPerStep)
	fmt.Fprintf(w, "  peak memory        %.1f MB\n", r.PeakRSSMB)
}

// dbosVersion is the version of DBOS Transact Go this binary was built
// with, from go.mod.
func dbosVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == "github.com/dbos-inc/dbos-transact-golang" {
				if m.Replace != nil {
					return m.Replace.Version
				}
				return m.Version
			}
		}
	}
	return "unknown"
}
