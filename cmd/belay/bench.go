package main

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

const benchUsage = `usage: belay bench [--runs N] [--steps K] [--concurrency C] [--store sqlite] [--db PATH] [--json]
       belay bench --parked N [--idle 20s] [--resumes 200] [--store sqlite] [--json]
       belay bench --waiting N [--idle 20s] [--resumes 200] [--store sqlite] [--json]
       belay bench --timers N [--resumes 200] [--store sqlite] [--json]
       belay bench --streams N [--idle 20s] [--resumes 200] [--store sqlite] [--json]
       belay bench --takeover [--runs 32] [--lease-ttl 5s] [--store sqlite] [--json]
       belay bench --scenario keys [--runs 1000] [--keys 5] [--model-latency D] [--json]
       belay bench --scenario fairness [--backlog 10000] [--late 10] [--model-latency D] [--json]
       belay bench --scenario tpm [--runs 64] [--tpm 60000] [--duration 75s] [--json]

Runs N agents of K tool calls each against a scripted model and a no-op tool,
so what is measured is Belay itself: durable steps per second, per-step overhead,
bytes written per step and group commit.

With --parked N it parks N runs on approval instead, starts a worker over them
in a process of its own, and reports that process's memory and idle CPU, then
the time from an approval decided here to the worker's claim of its run.

With --waiting N it does the same with N runs that asked their user a question
(ask_user) and wait for the reply, then replies to them from here.

With --timers N it has N runs sleep on timers a day away, starts a worker over
them in a process of its own, then has --resumes more runs come due, 20 ms
apart, and reports how late the worker claims each, against its poll.

With --streams N it parks N runs the same way, starts a server over them in a
process of its own, opens one live event stream on each, and reports the
server's memory and idle CPU, then the time from each event's commit to its
arrival on the streams as approvals decided here let the runs finish.

With --takeover it starts --runs runs (32 if not given) on a worker in a
process of its own, kills it with SIGKILL in the middle of its steps, and times
until another worker has claimed each run; then freezes that one with SIGSTOP
and times until a third has claimed them, once their leases run out.

With --scenario keys it runs --runs runs (1000) on --keys concurrency keys
and counts, from the runs' traces, the times two runs of one key were in a
step at once (0 expected). With --scenario fairness it queues --backlog runs
of tenant A, starts the workers on them, then starts --late runs of tenant B
and reports B's wait from creation to first claim (p50, p99). With --scenario
tpm, --runs runs (64) call a model whose provider account answers 429 above
--tpm tokens a minute, far below their demand: once with Belay's shared
limit at --tpm, once without, each for --duration; it reports the 429s after
the first minute and the tokens a minute admitted then.`

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", benchUsage, stdout)
	var cfg benchConfig
	fs.IntVar(&cfg.runs, "runs", 200, "number of runs")
	fs.IntVar(&cfg.steps, "steps", 8, "durable steps (tool calls) per run")
	fs.IntVar(&cfg.concurrency, "concurrency", 64, "runs executed at once (the runtime's Workers)")
	fs.DurationVar(&cfg.modelLatency, "model-latency", 0, "mean time a model call takes, each drawn between half and one and a half times it (default none: the store is saturated and every step queues for it)")
	kind := fs.String("store", "sqlite", "store to measure: sqlite, or postgres (with --database-url or $BELAY_DATABASE_URL)")
	dbURL := fs.String("database-url", os.Getenv("BELAY_DATABASE_URL"), "PostgreSQL URL for --store postgres; bench uses a schema of its own and drops it after")
	db := fs.String("db", "", "path of a new SQLite database to write and keep (default: a temporary file, removed after)")
	asJSON := jsonFlag(fs, "the figures, one object")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the execution to this file")
	parked := fs.Int("parked", 0, "instead: park this many runs on approval, then measure a worker over them in a process of its own (memory, idle CPU) and approve→resume from this one")
	waiting := fs.Int("waiting", 0, "instead: have this many runs ask their user a question (ask_user) and wait, then measure a worker over them in a process of its own (memory, idle CPU) and reply→resume from this one")
	timers := fs.Int("timers", 0, "instead: have this many runs sleep on timers, then time how late a worker over them in a process of its own starts runs that come due")
	idle := fs.Duration("idle", 20*time.Second, "with --parked or --waiting: how long the idle worker is measured")
	resumes := fs.Int("resumes", 200, "with --parked or --waiting: how many approvals are decided (or replies sent) and timed until their run is claimed; with --streams, until their stream ends")
	takeover := fs.Bool("takeover", false, "instead: kill a worker (SIGKILL) mid-step, then freeze another (SIGSTOP), and time until a worker in another process has claimed each run")
	leaseTTL := fs.Duration("lease-ttl", 5*time.Second, "with --takeover: the workers' lease time-to-live")
	scenario := fs.String("scenario", "", "instead: a flow-control scenario: keys (runs on few concurrency keys; overlaps from the traces), fairness (tenant A's backlog, tenant B's wait) or tpm (a provider's tokens per minute, with and without a shared limit)")
	keys := fs.Int("keys", 5, "with --scenario keys: the concurrency keys the runs share")
	backlog := fs.Int("backlog", 10000, "with --scenario fairness: tenant A's queued runs")
	tpm := fs.Float64("tpm", 60000, "with --scenario tpm: the provider account's tokens per minute (each call takes 1,200)")
	duration := fs.Duration("duration", 75*time.Second, "with --scenario tpm: how long each half (with the shared limit, then without) runs; the first minute is warm-up")
	late := fs.Int("late", 10, "with --scenario fairness: tenant B's runs, started once the workers are busy with A's")
	streams := fs.Int("streams", 0, "instead: park this many runs on approval, open an event stream on each on a server in a process of its own, measure it idle (memory, CPU), then time events from their commit to their arrival on the streams")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	if cfg.runs < 1 || cfg.steps < 1 || cfg.concurrency < 1 {
		return usageError{"bench: --runs, --steps and --concurrency must be at least 1"}
	}
	if cfg.modelLatency < 0 {
		return usageError{"bench: --model-latency must not be negative"}
	}
	switch *kind {
	case "sqlite":
	case "postgres":
		if *dbURL == "" {
			return usageError{"bench: --store postgres needs --database-url (or $BELAY_DATABASE_URL)"}
		}
		cfg.url = *dbURL
	default:
		return usageError{fmt.Sprintf("bench: unknown store %q (want sqlite or postgres)", *kind)}
	}

	cfg.path = *db
	if cfg.url != "" {
		// The PostgreSQL figures come from a schema of bench's own.
	} else if cfg.path == "" {
		dir, err := os.MkdirTemp("", "belay-bench-")
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(dir)
		cfg.path = filepath.Join(dir, "bench.db")
	} else if _, err := os.Stat(cfg.path); !errors.Is(err, os.ErrNotExist) {
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		return fmt.Errorf("bench: %s exists; bench writes a new database (remove it or pass another --db)", cfg.path)
	}
	cfg.log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if isTerminal(stderr) {
		cfg.progress = stderr
	}

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if *takeover {
		if !fs.given("runs") {
			cfg.runs = 32
		}
		tres, err := benchTakeover(ctx, takeoverConfig{benchConfig: cfg, ttl: *leaseTTL})
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, tres)
		}
		tres.print(stdout)
		return nil
	}
	switch *scenario {
	case "":
	case "keys":
		if !fs.given("runs") {
			cfg.runs = 1000
		}
		if !fs.given("steps") {
			cfg.steps = 2
		}
		if *keys < 1 {
			return usageError{"bench: --keys must be at least 1"}
		}
		res, err := benchKeys(ctx, cfg, *keys)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, res)
		}
		res.print(stdout)
		return nil
	case "fairness":
		if !fs.given("steps") {
			cfg.steps = 2
		}
		if *backlog < cfg.concurrency || *late < 1 {
			return usageError{"bench: --scenario fairness needs a --backlog of at least --concurrency runs (the workers are busy with them) and --late of 1 or more"}
		}
		res, err := benchFairness(ctx, cfg, *backlog, *late)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, res)
		}
		res.print(stdout)
		return nil
	case "tpm":
		if !fs.given("runs") {
			cfg.runs = 64
		}
		if !fs.given("model-latency") {
			cfg.modelLatency = 20 * time.Millisecond
		}
		if *tpm < 1200 || *duration <= 0 {
			return usageError{"bench: --scenario tpm needs --tpm of at least 1200 (one call) and a --duration above 0"}
		}
		res, err := benchTPM(ctx, cfg, *tpm, *duration)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, res)
		}
		res.print(stdout)
		return nil
	default:
		return usageError{fmt.Sprintf("bench: unknown --scenario %q (want keys, fairness or tpm)", *scenario)}
	}
	if *streams > 0 {
		sres, err := benchStreams(ctx, streamsConfig{benchConfig: cfg, streams: *streams, decisions: *resumes, idle: *idle})
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, sres)
		}
		sres.print(stdout)
		return nil
	}
	if *timers > 0 {
		if *parked > 0 || *waiting > 0 {
			return usageError{"bench: --timers, --parked or --waiting, one of them"}
		}
		tres, err := benchTimers(ctx, cfg, *timers, *resumes)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, tres)
		}
		tres.print(stdout)
		return nil
	}
	if *parked > 0 && *waiting > 0 {
		return usageError{"bench: --parked or --waiting, not both"}
	}
	if *parked > 0 || *waiting > 0 {
		pres, err := benchParked(ctx, parkedConfig{benchConfig: cfg, parked: max(*parked, *waiting), onInput: *waiting > 0,
			resumes: *resumes, idle: *idle})
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, pres)
		}
		pres.print(stdout)
		return nil
	}
	res, err := bench(ctx, cfg)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, res)
	}
	res.print(stdout)
	if *db != "" {
		fmt.Fprintf(stdout, "\nThe runs are in %s: belay runs --db %s\n", *db, *db)
	}
	return nil
}

type benchConfig struct {
	runs, steps, concurrency int
	// modelLatency is how long each model call takes.
	modelLatency time.Duration
	path         string
	// url, if set, measures PostgreSQL instead of the SQLite file at path,
	// in schema (default: a new one of bench's own).
	url, schema string
	log         *slog.Logger
	// progress, if set, receives a progress bar.
	progress io.Writer
}

// benchResult is what `belay bench --json` prints. Seconds is the wall time
// of the execution, from Start until no run is left; creating the runs is
// not timed, and Commits and Writes count the execution only.
type benchResult struct {
	Runs           int     `json:"runs"`
	StepsPerRun    int     `json:"steps_per_run"`
	Concurrency    int     `json:"concurrency"`
	ModelLatencyMS float64 `json:"model_latency_ms"`
	Store          string  `json:"store"`
	Steps          int     `json:"steps"`
	Seconds        float64 `json:"seconds"`
	StepsPerSec    float64 `json:"steps_per_sec"`
	OverheadP50MS  float64 `json:"overhead_p50_ms"`
	OverheadP99MS  float64 `json:"overhead_p99_ms"`
	DBBytesPerStep float64 `json:"db_bytes_per_step"`
	// BytesPerStep, Commits and Writes are the SQLite writer's counts; a
	// PostgreSQL store keeps none, and they are left out.
	BytesPerStep *float64 `json:"bytes_per_step,omitempty"`
	Commits      *int64   `json:"commits,omitempty"`
	Writes       *int64   `json:"writes,omitempty"`
	PeakRSSMB    float64  `json:"peak_rss_mb"`
}

func (r benchResult) print(w io.Writer) {
	fmt.Fprintf(w, "belay bench: %d runs x %d steps, concurrency %d, store %s", r.Runs, r.StepsPerRun, r.Concurrency, r.Store)
	if r.ModelLatencyMS > 0 {
		fmt.Fprintf(w, ", model latency %g ms", r.ModelLatencyMS)
	}
	fmt.Fprint(w, "\n\n")
	fmt.Fprintf(w, "  durable steps      %d\n", r.Steps)
	fmt.Fprintf(w, "  wall time          %.3f s (execution; creating the runs is not timed)\n", r.Seconds)
	fmt.Fprintf(w, "  throughput         %.1f durable steps/s\n", r.StepsPerSec)
	fmt.Fprintf(w, "  overhead per step  p50 %.3f ms, p99 %.3f ms (step time minus model and tools)\n", r.OverheadP50MS, r.OverheadP99MS)
	if r.BytesPerStep != nil {
		fmt.Fprintf(w, "  bytes per step     %.0f written, %.0f of database\n", *r.BytesPerStep, r.DBBytesPerStep)
	} else {
		fmt.Fprintf(w, "  bytes per step     %.0f of database\n", r.DBBytesPerStep)
	}
	if r.Commits != nil && r.Writes != nil {
		ratio := 0.0
		if *r.Commits > 0 {
			ratio = float64(*r.Writes) / float64(*r.Commits)
		}
		fmt.Fprintf(w, "  group commit       %d writes in %d commits (%.1f writes per commit)\n", *r.Writes, *r.Commits, ratio)
	}
	fmt.Fprintf(w, "  peak memory        %.1f MB\n", r.PeakRSSMB)
}

// bench creates the runs, executes them all and measures.
func bench(ctx context.Context, cfg benchConfig) (benchResult, error) {
	s, kind, cleanup, err := openBenchStore(ctx, cfg)
	if err != nil {
		return benchResult{}, err
	}
	defer cleanup()

	rec := newStepRecorder(cfg.runs * cfg.steps)
	answered := newCountdown(cfg.runs)
	rt, err := belay.New(belay.Config{
		Store:        s,
		Agents:       []*belay.Agent{benchAgent(cfg.steps, cfg.modelLatency, answered.done)},
		Workers:      cfg.concurrency,
		Logger:       cfg.log,
		StepObserver: rec.observe,
	})
	if err != nil {
		return benchResult{}, fmt.Errorf("bench: %w", err)
	}
	ids, err := createBenchRuns(ctx, rt, cfg.runs, cfg.concurrency)
	if err != nil {
		return benchResult{}, err
	}

	before, counted := storeStats(s)
	stopProgress := startProgress(cfg.progress, &rec.n, cfg.runs*cfg.steps)
	start := time.Now()
	if err := rt.Start(ctx); err != nil {
		stopProgress()
		return benchResult{}, fmt.Errorf("bench: %w", err)
	}
	waitErr := waitRuns(ctx, s, answered.zero)
	elapsed := time.Since(start)
	stopProgress()
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := rt.Stop(stopCtx); err != nil {
		return benchResult{}, fmt.Errorf("bench: stop runtime: %w", err)
	}
	if waitErr != nil {
		return benchResult{}, fmt.Errorf("bench: wait for runs: %w", waitErr)
	}
	after, _ := storeStats(s)
	if err := checkBenchRuns(ctx, s, ids, cfg.steps); err != nil {
		return benchResult{}, err
	}
	size, err := storeSize(ctx, s)
	if err != nil {
		return benchResult{}, fmt.Errorf("bench: %w", err)
	}

	steps := cfg.runs * cfg.steps
	p50, p99 := rec.percentiles()
	res := benchResult{
		Runs: cfg.runs, StepsPerRun: cfg.steps, Concurrency: cfg.concurrency, Store: kind,
		ModelLatencyMS: round(ms(cfg.modelLatency), 3),
		Steps:          steps,
		Seconds:        round(elapsed.Seconds(), 6),
		StepsPerSec:    round(float64(steps)/elapsed.Seconds(), 1),
		OverheadP50MS:  round(ms(p50), 3),
		OverheadP99MS:  round(ms(p99), 3),
		DBBytesPerStep: round(float64(size)/float64(steps), 1),
		PeakRSSMB:      round(peakRSSMB(), 1),
	}
	if counted {
		res.BytesPerStep = ptr(round(float64(after.BytesWritten-before.BytesWritten)/float64(steps), 1))
		res.Commits = ptr(after.Commits - before.Commits)
		res.Writes = ptr(after.Writes - before.Writes)
	}
	return res, nil
}

func ptr[T any](v T) *T { return &v }

// benchAgent calls a no-op tool steps times, one call a turn, then answers
// and calls answered. Nothing but Belay takes time: the model is scripted and
// the tool returns at once, unless latency makes each model call take that
// long.
func benchAgent(steps int, latency time.Duration, answered func()) *belay.Agent {
	noop := belay.Tool{
		Name:        "noop",
		Description: "Does nothing.",
		Effect:      belay.Read,
		InputSchema: json.RawMessage(`{"type":"object"}`),
		Call: func(context.Context, json.RawMessage) (json.RawMessage, error) {
			return json.RawMessage(`{"ok":true}`), nil
		},
	}
	m := scripted.Func(func(req model.Request) (scripted.Reply, error) {
		// The conversation is the input, then an assistant turn and its
		// tool results per step.
		done := (len(req.Messages) - 1) / 2
		if done < steps {
			args := json.RawMessage(`{"i":` + strconv.Itoa(done) + `}`)
			return scripted.Reply{Calls: []scripted.Call{{Name: "noop", Args: args}}}, nil
		}
		answered()
		return scripted.Reply{Text: "done"}, nil
	})
	return &belay.Agent{
		Name:         "bench",
		Model:        slowModel{Model: m, latency: latency},
		Instructions: "Call noop until told otherwise.",
		Tools:        []belay.Tool{noop},
		Budget:       belay.Budget{MaxTurns: steps + 1},
		// A no-op tool learns nothing by design; loop detection would
		// rightly stop these runs.
		LoopDetector: belay.LoopDetector{Mode: "off"},
		Prices:       scripted.Prices,
	}
}

// slowModel answers like Model, after about latency: a stand-in for a
// provider's response time, so that the store is not saturated and what is
// measured is the overhead a step pays beside a real model. Each call takes
// between half and one and a half times latency, uniformly, as a provider's
// times vary: with one fixed time every run would come back from its model
// together with the runs it started with, and they would march through the
// store in convoys that real traffic does not make.
type slowModel struct {
	model.Model
	latency time.Duration
}

func (m slowModel) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	if m.latency > 0 {
		t := time.NewTimer(m.latency/2 + rand.N(m.latency))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return model.Response{}, ctx.Err()
		}
	}
	return m.Model.Generate(ctx, req)
}

// createBenchRuns starts n runs from up to workers goroutines, so creation
// shares commits the way execution does. It returns the ids in id order.
func createBenchRuns(ctx context.Context, rt *belay.Runtime, n, workers int) ([]string, error) {
	var nonce [4]byte
	_, _ = cryptorand.Read(nonce[:])
	prefix := "bench-" + hex.EncodeToString(nonce[:]) + "-"

	ids := make([]string, n)
	errs := make([]error, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, workers) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				run, _, err := rt.StartRun(ctx, belay.RunRequest{
					Agent: "bench", ClientRequestID: prefix + strconv.Itoa(i), Input: "bench run " + strconv.Itoa(i),
				})
				ids[i], errs[i] = run.ID, err
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("bench: create runs: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	slices.Sort(ids)
	return ids, nil
}

// countdown closes zero when done has been called n times.
type countdown struct {
	left atomic.Int64
	zero chan struct{}
}

func newCountdown(n int) *countdown {
	c := &countdown{zero: make(chan struct{})}
	c.left.Store(int64(n))
	return c
}

func (c *countdown) done() {
	if c.left.Add(-1) == 0 {
		close(c.zero)
	}
}

// waitRuns returns when no run in the store is queued or running; bench
// writes a new database, so those are all its runs. Reading the store
// competes with the runs for the CPU, so it is read rarely until answered
// is closed (every run has its final answer and is writing its last
// checkpoint), then every millisecond. A run that ends otherwise is still
// noticed, later.
func waitRuns(ctx context.Context, s store.Store, answered <-chan struct{}) error {
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-answered:
			answered = nil
		case <-timer.C:
		}
		busy, err := anyRunBusy(ctx, s)
		if err != nil || !busy {
			return err
		}
		if answered == nil {
			timer.Reset(time.Millisecond)
		} else {
			timer.Reset(min(max(time.Since(start)/20, 10*time.Millisecond), time.Second))
		}
	}
}

// anyRunBusy reports whether a run is queued or running. Queued is read
// first: a run moves from queued to running, so one that moves between the
// two reads is seen by the second.
func anyRunBusy(ctx context.Context, s store.Store) (bool, error) {
	for _, st := range []store.Status{store.StatusQueued, store.StatusRunning} {
		runs, err := s.ListRuns(ctx, store.ListRunsParams{Status: st, Limit: 1})
		if err != nil {
			return false, err
		}
		if len(runs) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// checkBenchRuns fails unless every run is done after exactly steps steps.
func checkBenchRuns(ctx context.Context, s store.Store, ids []string, steps int) error {
	var bad []string
	for _, id := range ids {
		run, err := s.GetRun(ctx, "", id)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		switch {
		case run.Status != store.StatusDone:
			bad = append(bad, fmt.Sprintf("%s is %s (%s: %s)", run.ID, run.Status, run.StopReason, oneLine(run.StopDetail, 120)))
		case run.Step != steps:
			bad = append(bad, fmt.Sprintf("%s is done after %d steps, not %d", run.ID, run.Step, steps))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	const shown = 3
	n, more := len(bad), ""
	if n > shown {
		more = fmt.Sprintf("; and %d more", n-shown)
		bad = bad[:shown]
	}
	return fmt.Errorf("bench: %d of %d runs did not end done: %s%s", n, len(ids), strings.Join(bad, "; "), more)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func round(x float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	return math.Round(x*p) / p
}
