package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/server"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/postgres"
	"github.com/belayrun/belay/store/sqlite"
)

// belay bench --streams N measures live event streams: it parks N runs on
// approval, starts a server over them in a process of its own (as belay
// serve would be: workers, the API, one EventHub fed by the runtime's
// Observer), opens one GET /v1/runs/{id}/events stream on each run from
// this process, and reports the server's memory and the CPU it burns while
// the N streams wait. Then it decides some approvals from this process,
// one at a time: each decision's event reaches its stream through the
// store's wakeup, and the events the server's worker then writes as it
// finishes the run reach it through the Observer. Each event is timed from
// its commit (as the writer saw it: the server's Observer call, or the
// return of the decision here) to its arrival on the stream.

// streamsResult is what `belay bench --streams N --json` prints.
type streamsResult struct {
	Store       string  `json:"store"`
	Streams     int     `json:"streams"`
	OpenSeconds float64 `json:"open_seconds"`
	IdleSeconds float64 `json:"idle_seconds"`
	RSSMB       float64 `json:"rss_mb"`
	// RSSBeforeMB is the server's memory before the streams opened.
	RSSBeforeMB float64 `json:"rss_before_mb"`
	IdleCPUPct  float64 `json:"idle_cpu_pct"`
	Decisions   int     `json:"decisions"`
	// Events written by the server's own workers, seen through its
	// Observer.
	Events     int     `json:"events"`
	EventP50MS float64 `json:"event_p50_ms"`
	EventP99MS float64 `json:"event_p99_ms"`
	EventMaxMS float64 `json:"event_max_ms"`
	// The decisions' events, written by this process and seen through the
	// store's wakeup.
	DecidedP50MS float64 `json:"decided_p50_ms"`
	DecidedP99MS float64 `json:"decided_p99_ms"`
	DecidedMaxMS float64 `json:"decided_max_ms"`
}

func (r streamsResult) print(w io.Writer) {
	fmt.Fprintf(w, "%d event streams (%s) open on one server, each on a run parked on approval, in %.1f s\n", r.Streams, r.Store, r.OpenSeconds)
	fmt.Fprintf(w, "server while they wait, %.0f s: RSS %.1f MB (%.1f MB before they opened), CPU %.2f%% of a core\n",
		r.IdleSeconds, r.RSSMB, r.RSSBeforeMB, r.IdleCPUPct)
	fmt.Fprintf(w, "commit -> arrival on the stream, %d events the server's workers wrote after %d approvals: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
		r.Events, r.Decisions, r.EventP50MS, r.EventP99MS, r.EventMaxMS)
	fmt.Fprintf(w, "the approvals' own events, written by this process (store wakeup): p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
		r.DecidedP50MS, r.DecidedP99MS, r.DecidedMaxMS)
}

type streamsConfig struct {
	benchConfig
	streams, decisions int
	idle               time.Duration
}

// eventKey names one event of a run: its type and its time, which the
// store keeps to the nanosecond.
type eventKey struct {
	run, typ string
	at       int64
}

// arrivals records when each event reached its stream.
type arrivals struct {
	mu sync.Mutex
	at map[eventKey]int64
	// ready counts the streams that have read their run's history; ended
	// those that received the end.
	ready, ended map[string]bool
	changed      chan struct{}
}

func (a *arrivals) note(f func()) {
	a.mu.Lock()
	f()
	a.mu.Unlock()
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

// waitFor waits until cond holds, read under the lock, or the deadline.
func (a *arrivals) waitFor(ctx context.Context, d time.Duration, what string, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		a.mu.Lock()
		ok := cond()
		a.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-a.changed:
		case <-ctx.Done():
			return fmt.Errorf("bench: waiting for %s: %w", what, ctx.Err())
		}
	}
}

func benchStreams(ctx context.Context, cfg streamsConfig) (streamsResult, error) {
	if cfg.url != "" {
		cfg.schema = newBenchSchema()
	}
	s, kind, cleanup, err := openBenchStore(ctx, cfg.benchConfig)
	if err != nil {
		return streamsResult{}, err
	}
	defer cleanup()
	res := streamsResult{Store: kind, Streams: cfg.streams}
	as, ok := s.(store.AccessStore)
	if !ok {
		return streamsResult{}, errors.New("bench: the store keeps no API keys")
	}
	rt, err := belay.New(belay.Config{Store: s, Agents: []*belay.Agent{parkedAgent()}, Workers: cfg.concurrency,
		HumanApproval: true, Logger: cfg.log})
	if err != nil {
		return streamsResult{}, fmt.Errorf("bench: %w", err)
	}
	if _, err := createBenchRuns(ctx, rt, cfg.streams, cfg.concurrency); err != nil {
		return streamsResult{}, err
	}
	if err := rt.Drain(ctx); err != nil {
		return streamsResult{}, fmt.Errorf("bench: park runs: %w", err)
	}
	pending, err := rt.Operator().PendingApprovals(ctx, "")
	if err != nil {
		return streamsResult{}, fmt.Errorf("bench: %w", err)
	}
	key, err := server.CreateKey(ctx, as, "default", "bench", []store.Role{store.RoleOperator}, time.Now())
	if err != nil {
		return streamsResult{}, fmt.Errorf("bench: %w", err)
	}

	srv, err := startBenchServer(ctx, cfg.benchConfig)
	if err != nil {
		return streamsResult{}, err
	}
	defer srv.stop()
	if err := sleepCtx(ctx, time.Second); err != nil {
		return streamsResult{}, err
	}
	res.RSSBeforeMB = round(processRSSMB(srv.cmd.Process.Pid), 1)

	// One stream on each parked run; each has read its run's history once
	// its stop event is in.
	arr := &arrivals{at: map[eventKey]int64{}, ready: map[string]bool{}, ended: map[string]bool{}, changed: make(chan struct{}, 1)}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.streams}}
	streamCtx, closeStreams := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		closeStreams()
		wg.Wait()
		client.CloseIdleConnections()
	}()
	opened := time.Now()
	for _, a := range pending {
		wg.Go(func() { followStream(streamCtx, client, srv.addr, key.Secret, a.RunID, arr) })
	}
	if err := arr.waitFor(ctx, 2*time.Minute, "the streams to open", func() bool { return len(arr.ready) == len(pending) }); err != nil {
		return streamsResult{}, err
	}
	res.OpenSeconds = round(time.Since(opened).Seconds(), 2)

	// The server while every stream waits.
	if err := sleepCtx(ctx, 2*time.Second); err != nil {
		return streamsResult{}, err
	}
	pid := srv.cmd.Process.Pid
	cpu0, ok := processCPU(pid)
	idleStart := time.Now()
	if err := sleepCtx(ctx, cfg.idle); err != nil {
		return streamsResult{}, err
	}
	if cpu1, ok1 := processCPU(pid); ok && ok1 {
		res.IdleCPUPct = round(100*(cpu1-cpu0).Seconds()/time.Since(idleStart).Seconds(), 2)
	}
	res.IdleSeconds = round(time.Since(idleStart).Seconds(), 1)
	res.RSSMB = round(processRSSMB(pid), 1)

	// Decide approvals one at a time, spread as people's are.
	op := belay.NewOperator(s)
	var decided []eventKey
	var decidedAt []int64
	runs := map[string]bool{}
	for _, a := range pending[:min(cfg.decisions, len(pending))] {
		d, err := op.Decide(ctx, a.Tenant, a.ID, belay.ApprovalDecision{Verdict: "approve", By: "human:bench"})
		if err != nil {
			return streamsResult{}, fmt.Errorf("bench: %w", err)
		}
		decided = append(decided, eventKey{run: a.RunID, typ: store.EventApprovalDecided, at: d.DecidedAt.UnixNano()})
		decidedAt = append(decidedAt, time.Now().UnixNano())
		runs[a.RunID] = true
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return streamsResult{}, err
		}
	}
	res.Decisions = len(decided)
	if err := arr.waitFor(ctx, time.Minute, "the decided runs' streams to end", func() bool {
		for id := range runs {
			if !arr.ended[id] {
				return false
			}
		}
		return true
	}); err != nil {
		return streamsResult{}, err
	}

	var own, other []time.Duration
	arr.mu.Lock()
	for i, k := range decided {
		if at, ok := arr.at[k]; ok {
			other = append(other, time.Duration(at-decidedAt[i]))
		}
	}
	for _, c := range srv.commits() {
		if at, ok := arr.at[c.key]; ok && runs[c.key.run] {
			own = append(own, time.Duration(at-c.at))
		}
	}
	arr.mu.Unlock()
	if len(other) != len(decided) {
		return streamsResult{}, fmt.Errorf("bench: %d of %d decisions reached their stream", len(other), len(decided))
	}
	res.Events = len(own)
	res.EventP50MS, res.EventP99MS, res.EventMaxMS = percentiles(own)
	res.DecidedP50MS, res.DecidedP99MS, res.DecidedMaxMS = percentiles(other)
	return res, nil
}

func percentiles(ds []time.Duration) (p50, p99, max float64) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	slices.Sort(ds)
	n := len(ds)
	return round(ms(ds[n/2]), 2), round(ms(ds[min(n-1, n*99/100)]), 2), round(ms(ds[n-1]), 2)
}

// followStream reads one run's event stream until it ends or ctx does,
// noting when each event arrives.
func followStream(ctx context.Context, client *http.Client, addr, key, runID string, arr *arrivals) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/v1/runs/"+runID+"/events", nil)
	if err != nil {
		return
	}
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := client.Do(req)
	if err != nil {
		return
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	var event, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "" && event != "":
			now := time.Now().UnixNano()
			if event == "end" {
				arr.note(func() { arr.ended[runID] = true })
				return
			}
			var e struct {
				Type string    `json:"type"`
				Time time.Time `json:"time"`
			}
			if json.Unmarshal([]byte(data), &e) == nil {
				arr.note(func() {
					arr.at[eventKey{run: runID, typ: e.Type, at: e.Time.UnixNano()}] = now
					if e.Type == store.EventStop {
						arr.ready[runID] = true
					}
				})
			}
			event, data = "", ""
		}
	}
}

// commit is one event the server's runtime made durable, and when its
// Observer was told.
type commit struct {
	key eventKey
	at  int64
}

// benchServer is the server process of belay bench --streams.
type benchServer struct {
	cmd  *exec.Cmd
	addr string
	done chan error

	mu   sync.Mutex
	seen []commit
}

func (b *benchServer) commits() []commit {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.seen)
}

// startBenchServer starts `belay bench-server` over the benchmark's store
// and waits until it serves.
func startBenchServer(ctx context.Context, cfg benchConfig) (*benchServer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	args := []string{"bench-server"}
	if cfg.url != "" {
		args = append(args, "--database-url", cfg.url, "--schema", cfg.schema)
	} else {
		args = append(args, "--db", cfg.path)
	}
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start the server: %w", err)
	}
	b := &benchServer{cmd: cmd, done: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 2 && f[0] == "ready":
				ready <- f[1]
			case len(f) == 5 && f[0] == "commit":
				at, err1 := strconv.ParseInt(f[3], 10, 64)
				seen, err2 := strconv.ParseInt(f[4], 10, 64)
				if err1 == nil && err2 == nil {
					b.mu.Lock()
					b.seen = append(b.seen, commit{key: eventKey{run: f[1], typ: f[2], at: at}, at: seen})
					b.mu.Unlock()
				}
			}
		}
		b.done <- cmd.Wait()
	}()
	select {
	case b.addr = <-ready:
		return b, nil
	case err := <-b.done:
		return nil, fmt.Errorf("bench: the server exited before it served: %v", err)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		return nil, ctx.Err()
	}
}

func (b *benchServer) stop() {
	_ = b.cmd.Process.Kill()
	<-b.done
}

const benchServerUsage = `usage: belay bench-server [--db PATH | --database-url URL --schema S]

The server process of belay bench --streams: workers for bench's agents and
the HTTP API, as belay serve runs them. It prints "ready ADDR" once it serves,
then "commit RUN TYPE EVENT_NS OBSERVED_NS" for each event its runtime
commits.`

// runBenchServer is `belay bench-server`.
func runBenchServer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench-server", benchServerUsage, stdout)
	path := fs.String("db", "", "the SQLite store")
	url := fs.String("database-url", "", "the PostgreSQL store")
	schema := fs.String("schema", "", "its schema")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	var s store.AccessStore
	var err error
	switch {
	case *url != "":
		s, err = postgres.Open(ctx, *url, postgres.Config{Schema: *schema})
	case *path != "":
		s, err = sqlite.Open(ctx, *path, sqlite.Config{})
	default:
		return usageError{"bench-server: --db or --database-url"}
	}
	if err != nil {
		return err
	}
	defer s.Close()
	// The commits are written by a goroutine of their own, so that the
	// Observer, on the worker's path, only takes the time.
	lines := make(chan string, 1<<16)
	printed := make(chan struct{})
	go func() {
		defer close(printed)
		w := bufio.NewWriter(stdout)
		for l := range lines {
			w.WriteString(l)
			if len(lines) == 0 {
				w.Flush()
			}
		}
		w.Flush()
	}()
	hub := server.NewEventHub(s, 0, nil)
	rt, err := belay.New(belay.Config{Store: s, Agents: []*belay.Agent{parkedAgent()}, HumanApproval: true,
		Observer: observers{commitPrinter(lines), hub}})
	if err != nil {
		return err
	}
	api, err := server.New(server.Config{Runtime: rt, Store: s, Events: hub})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	if err := rt.Start(ctx); err != nil {
		return err
	}
	lines <- "ready " + ln.Addr().String() + "\n"
	<-ctx.Done()
	api.CloseLive()
	_ = hs.Close()
	err = rt.Stop(context.WithoutCancel(ctx))
	close(lines)
	<-printed
	return err
}

// commitPrinter is an Observer that hands each event's line to the
// printer, with when it was told of it.
type commitPrinter chan<- string

func (c commitPrinter) Event(run belay.ObservedRun, ev store.Event) {
	line := fmt.Sprintf("commit %s %s %d %d\n", run.ID, ev.Type, ev.Time.UnixNano(), time.Now().UnixNano())
	select {
	case c <- line:
	default: // the printer is behind: this event goes untimed
	}
}

func (c commitPrinter) Checkpoint(belay.ObservedRun, time.Duration) {}
