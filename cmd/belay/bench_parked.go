package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/postgres"
	"github.com/belayrun/belay/store/sqlite"
)

// belay bench --parked N measures what runs cost while they wait: it parks N
// runs on approval, starts a worker over them in a process of its own (as
// belay serve would be), and reports that process's memory and the CPU it
// burns doing nothing for --idle, then decides some approvals from this
// process and times each until the worker has claimed the run it queued.
// belay bench --waiting N does the same with runs that asked their user a
// question (ask_user), and replies to them instead.

// parkedResult is what `belay bench --parked N --json` and `belay bench
// --waiting N --json` print: Parked counts runs waiting on approval,
// Waiting runs waiting on their user's reply.
type parkedResult struct {
	Store       string  `json:"store"`
	Parked      int     `json:"parked,omitempty"`
	Waiting     int     `json:"waiting,omitempty"`
	FillSeconds float64 `json:"fill_seconds"`
	IdleSeconds float64 `json:"idle_seconds"`
	RSSMB       float64 `json:"rss_mb"`
	IdleCPUPct  float64 `json:"idle_cpu_pct"`
	Resumes     int     `json:"resumes"`
	ResumeP50MS float64 `json:"resume_p50_ms"`
	ResumeP99MS float64 `json:"resume_p99_ms"`
	ResumeMaxMS float64 `json:"resume_max_ms"`
	// DecideP50MS is how long the decision's own write took, within the
	// resume; with --waiting, the reply's (ReplyP50MS).
	DecideP50MS  float64 `json:"decide_p50_ms,omitempty"`
	ReplyP50MS   float64 `json:"reply_p50_ms,omitempty"`
	WorkerPollMS float64 `json:"worker_poll_ms"`
}

func (r parkedResult) print(w io.Writer) {
	if r.Waiting > 0 {
		fmt.Fprintf(w, "%d runs waiting on their user's reply (%s) in %.1f s\n", r.Waiting, r.Store, r.FillSeconds)
		fmt.Fprintf(w, "idle worker over them, %.0f s: RSS %.1f MB, CPU %.2f%% of a core\n", r.IdleSeconds, r.RSSMB, r.IdleCPUPct)
		fmt.Fprintf(w, "reply (this process) -> resumed (the worker's claim), %d replies: p50 %.2f ms, p99 %.2f ms, max %.2f ms (the worker polls every %.0f ms; the reply's own write: p50 %.2f ms)\n",
			r.Resumes, r.ResumeP50MS, r.ResumeP99MS, r.ResumeMaxMS, r.WorkerPollMS, r.ReplyP50MS)
		return
	}
	fmt.Fprintf(w, "%d runs parked on approval (%s) in %.1f s\n", r.Parked, r.Store, r.FillSeconds)
	fmt.Fprintf(w, "idle worker over them, %.0f s: RSS %.1f MB, CPU %.2f%% of a core\n", r.IdleSeconds, r.RSSMB, r.IdleCPUPct)
	fmt.Fprintf(w, "approve (this process) -> resumed (the worker's claim), %d approvals: p50 %.2f ms, p99 %.2f ms, max %.2f ms (the worker polls every %.0f ms; the decision's own write: p50 %.2f ms)\n",
		r.Resumes, r.ResumeP50MS, r.ResumeP99MS, r.ResumeMaxMS, r.WorkerPollMS, r.DecideP50MS)
}

// parkedAgent's runs call an irreversible tool first, which waits for a
// person, then answer.
func parkedAgent() *belay.Agent {
	refund := belay.NewTool("refund", "Refund the order.", belay.Irreversible,
		func(context.Context, struct {
			Order string `json:"order"`
		}) (string, error) {
			return "refunded", nil
		})
	return &belay.Agent{Name: "bench", Tools: []belay.Tool{refund}, Prices: scripted.Prices, Model: scripted.New(
		scripted.Reply{Calls: []scripted.Call{{Name: "refund", Args: map[string]string{"order": "A-1"}}}},
		scripted.Reply{Text: "refunded"},
	)}
}

// waitingAgent's runs ask their user how to refund, which waits for the
// reply, then answer.
func waitingAgent() *belay.Agent {
	return &belay.Agent{Name: "bench", Prices: scripted.Prices, Conversation: &belay.Conversation{},
		Model: scripted.New(
			scripted.Reply{Calls: []scripted.Call{{Name: belay.AskUserTool, Args: map[string]string{"question": "Card or store credit?"}}}},
			scripted.Reply{Text: "refunded"},
		)}
}

type parkedConfig struct {
	benchConfig
	parked, resumes int
	idle            time.Duration
	// onInput parks the runs on a question to their user instead of an
	// approval, and resumes them with a reply.
	onInput bool
}

// parkedRun is a run the bench parked, and how to resume it.
type parkedRun struct {
	runID  string
	resume func(ctx context.Context, op *belay.Operator) error
}

// parkedRuns lists the runs that wait, one each, and checks that every run
// created does.
func parkedRuns(ctx context.Context, rt *belay.Runtime, cfg parkedConfig, created int) ([]parkedRun, error) {
	var runs []parkedRun
	if cfg.onInput {
		waits, err := rt.Operator().PendingWaits(ctx, belay.AnyTenant)
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		for _, w := range waits {
			if w.Kind != store.WaitInput {
				continue
			}
			runs = append(runs, parkedRun{runID: w.RunID, resume: func(ctx context.Context, op *belay.Operator) error {
				_, err := op.Say(ctx, w.Tenant, w.RunID, belay.Reply{Text: "To my card, please."})
				return err
			}})
		}
	} else {
		pending, err := rt.Operator().PendingApprovals(ctx, "")
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		for _, a := range pending {
			runs = append(runs, parkedRun{runID: a.RunID, resume: func(ctx context.Context, op *belay.Operator) error {
				_, err := op.Decide(ctx, a.Tenant, a.ID, belay.ApprovalDecision{Choice: belay.Approve, By: "human:bench"})
				return err
			}})
		}
	}
	if len(runs) != created {
		return nil, fmt.Errorf("bench: %d runs created, %d waiting", created, len(runs))
	}
	return runs, nil
}

func benchParked(ctx context.Context, cfg parkedConfig) (parkedResult, error) {
	if cfg.url != "" {
		// The worker opens the same schema.
		cfg.schema = newBenchSchema()
	}
	s, kind, cleanup, err := openBenchStore(ctx, cfg.benchConfig)
	if err != nil {
		return parkedResult{}, err
	}
	defer cleanup()
	res := parkedResult{Store: kind, WorkerPollMS: ms(200 * time.Millisecond)}
	agent, workerAgent := parkedAgent(), "parked"
	if cfg.onInput {
		res.Waiting = cfg.parked
		agent, workerAgent = waitingAgent(), "waiting"
	} else {
		res.Parked = cfg.parked
	}

	// Park the runs: each takes one step, to its approval or question.
	rt, err := belay.New(belay.Config{Store: s, Agents: []*belay.Agent{agent}, Workers: cfg.concurrency,
		HumanApproval: true, Logger: cfg.log})
	if err != nil {
		return parkedResult{}, fmt.Errorf("bench: %w", err)
	}
	start := time.Now()
	ids, err := createBenchRuns(ctx, rt, cfg.parked, cfg.concurrency)
	if err != nil {
		return parkedResult{}, err
	}
	if err := rt.Drain(ctx); err != nil {
		return parkedResult{}, fmt.Errorf("bench: park runs: %w", err)
	}
	res.FillSeconds = round(time.Since(start).Seconds(), 3)
	pending, err := parkedRuns(ctx, rt, cfg, len(ids))
	if err != nil {
		return parkedResult{}, err
	}

	// The worker, in a process of its own.
	worker, err := startBenchWorker(ctx, cfg.benchConfig, "--agent", workerAgent)
	if err != nil {
		return parkedResult{}, err
	}
	defer worker.stop()
	// Settle, then measure what the worker costs doing nothing.
	if err := sleepCtx(ctx, 2*time.Second); err != nil {
		return parkedResult{}, err
	}
	cpu0, ok := processCPU(worker.cmd.Process.Pid)
	idleStart := time.Now()
	if err := sleepCtx(ctx, cfg.idle); err != nil {
		return parkedResult{}, err
	}
	if cpu1, ok1 := processCPU(worker.cmd.Process.Pid); ok && ok1 {
		res.IdleCPUPct = round(100*(cpu1-cpu0).Seconds()/time.Since(idleStart).Seconds(), 2)
	}
	res.IdleSeconds = round(time.Since(idleStart).Seconds(), 1)
	res.RSSMB = round(processRSSMB(worker.cmd.Process.Pid), 1)

	// Decide approvals (or reply) one at a time, each timed until the
	// worker claims the run it queued.
	op := belay.NewOperator(s)
	var lat, decide []time.Duration
	for _, p := range pending[:min(cfg.resumes, len(pending))] {
		t0 := time.Now()
		if err := p.resume(ctx, op); err != nil {
			return parkedResult{}, fmt.Errorf("bench: %w", err)
		}
		decide = append(decide, time.Since(t0))
		claimed, err := awaitClaim(ctx, s, p.runID, 30*time.Second)
		if err != nil {
			return parkedResult{}, err
		}
		lat = append(lat, claimed.Sub(t0))
		// Spread the approvals, as people's are.
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return parkedResult{}, err
		}
	}
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		res.Resumes = n
		res.ResumeP50MS = round(ms(lat[n/2]), 2)
		res.ResumeP99MS = round(ms(lat[min(n-1, n*99/100)]), 2)
		res.ResumeMaxMS = round(ms(lat[n-1]), 2)
		slices.Sort(decide)
		if cfg.onInput {
			res.ReplyP50MS = round(ms(decide[n/2]), 2)
		} else {
			res.DecideP50MS = round(ms(decide[n/2]), 2)
		}
	}
	return res, nil
}

// awaitClaim waits until a worker has claimed the run again after its
// approval or reply, and returns when it did by the worker's own clock: the time of
// the run's last claimed event. The store is read every millisecond, and the
// time comes from the worker, so neither this process's polling nor its
// period is in the figure.
func awaitClaim(ctx context.Context, s store.Store, runID string, within time.Duration) (time.Time, error) {
	deadline := time.Now().Add(within)
	for {
		events, err := s.Events(ctx, runID)
		if err != nil {
			return time.Time{}, fmt.Errorf("bench: %w", err)
		}
		// The run's first claim parked it; the second is the resume.
		claims := 0
		for _, ev := range events {
			if ev.Type == store.EventClaimed {
				if claims++; claims == 2 {
					return ev.Time, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("bench: run %s not claimed %s after its approval or reply", runID, within)
		}
		if err := sleepCtx(ctx, time.Millisecond); err != nil {
			return time.Time{}, err
		}
	}
}

// benchWorker is the worker process of a benchmark.
type benchWorker struct {
	cmd  *exec.Cmd
	done chan error
}

// startBenchWorker starts `belay bench-worker` over the benchmark's store,
// with more of its flags, and waits until it works.
func startBenchWorker(ctx context.Context, cfg benchConfig, more ...string) (*benchWorker, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	args := []string{"bench-worker"}
	if cfg.url != "" {
		args = append(args, "--database-url", cfg.url, "--schema", cfg.schema)
	} else {
		args = append(args, "--db", cfg.path)
	}
	args = append(args, more...)
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start the worker: %w", err)
	}
	w := &benchWorker{cmd: cmd, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
			}
		}
		w.done <- cmd.Wait()
	}()
	select {
	case <-ready:
		return w, nil
	case err := <-w.done:
		return nil, fmt.Errorf("bench: the worker exited before it was ready: %v", err)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return nil, ctx.Err()
	}
}

func (w *benchWorker) stop() {
	_ = w.cmd.Process.Kill()
	<-w.done
}

const benchWorkerUsage = `usage: belay bench-worker [--db PATH | --database-url URL --schema S] [--agent parked|waiting|timers|takeover]

The worker process of belay bench: it executes the runs of bench's agents
until it is killed, and prints "ready" once it works.`

// runBenchWorker is `belay bench-worker`: a runtime over bench's store, as
// belay serve is over its, without the HTTP server.
func runBenchWorker(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench-worker", benchWorkerUsage, stdout)
	path := fs.String("db", "", "the SQLite store")
	url := fs.String("database-url", "", "the PostgreSQL store")
	schema := fs.String("schema", "", "its schema")
	agentName := fs.String("agent", "parked", "the bench whose agent it runs: parked, waiting, timers or takeover")
	ttl := fs.Duration("lease-ttl", 30*time.Second, "lease time-to-live")
	latency := fs.Duration("model-latency", 0, "with --agent takeover: the model's mean latency")
	workers := fs.Int("workers", 16, "runs executed at once")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	var agent *belay.Agent
	switch *agentName {
	case "parked":
		agent = parkedAgent()
	case "waiting":
		agent = waitingAgent()
	case "timers":
		agent = timersAgent()
	case "takeover":
		agent = takeoverAgent(*latency)
	default:
		return usageError{fmt.Sprintf("bench-worker: unknown --agent %q (want parked, waiting, timers or takeover)", *agentName)}
	}
	var s store.Store
	var err error
	switch {
	case *url != "":
		s, err = postgres.Open(ctx, *url, postgres.Config{Schema: *schema})
	case *path != "":
		s, err = sqlite.Open(ctx, *path, sqlite.Config{})
	default:
		return usageError{"bench-worker: --db or --database-url"}
	}
	if err != nil {
		return err
	}
	defer s.Close()
	rt, err := belay.New(belay.Config{Store: s, Agents: []*belay.Agent{agent}, HumanApproval: true,
		LeaseTTL: *ttl, Workers: *workers})
	if err != nil {
		return err
	}
	if err := rt.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "ready")
	<-ctx.Done()
	return rt.Stop(context.WithoutCancel(ctx))
}

// processCPU is the CPU time a process has used so far, user and system,
// from /proc (Linux); false elsewhere.
func processCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The fields after the command name, which may hold spaces, in
	// parentheses: utime and stime are the 12th and 13th of them.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if errors.Join(err1, err2) != nil {
		return 0, false
	}
	// Clock ticks, which Linux counts 100 to the second.
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
}

// processRSSMB is a process's resident memory now, from /proc (Linux); 0
// elsewhere.
func processRSSMB(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}

// sleepCtx waits d, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
