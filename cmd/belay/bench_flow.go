package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// The flow-control scenarios of `belay bench --scenario`: what a fleet's
// claims do with runs together, read from the runs' traces.

// keysResult is what `belay bench --scenario keys --json` prints.
type keysResult struct {
	Scenario    string  `json:"scenario"`
	Store       string  `json:"store"`
	Runs        int     `json:"runs"`
	Keys        int     `json:"keys"`
	Concurrency int     `json:"concurrency"`
	Seconds     float64 `json:"seconds"`
	// Holds are the spans, claim to stop or release, in which a run was in
	// a step; Overlaps counts the pairs of one key's holds that overlap (0
	// expected).
	Holds    int `json:"holds"`
	Overlaps int `json:"overlaps"`
}

func (r keysResult) print(w io.Writer) {
	fmt.Fprintf(w, "belay bench --scenario keys: %d runs in %d concurrency keys, concurrency %d, store %s\n\n", r.Runs, r.Keys, r.Concurrency, r.Store)
	fmt.Fprintf(w, "  wall time   %.3f s\n", r.Seconds)
	fmt.Fprintf(w, "  holds       %d (claim to stop or release, from the traces)\n", r.Holds)
	fmt.Fprintf(w, "  overlaps    %d (two runs of one key in a step at once; 0 expected)\n", r.Overlaps)
}

// benchKeys runs cfg.runs runs spread over keys concurrency keys, with
// workers to spare, and counts from the traces the times two runs of one
// key were in a step at once.
func benchKeys(ctx context.Context, cfg benchConfig, keys int) (keysResult, error) {
	s, kind, cleanup, err := openBenchStore(ctx, cfg)
	if err != nil {
		return keysResult{}, err
	}
	defer cleanup()
	answered := newCountdown(cfg.runs)
	rt, err := belay.New(belay.Config{Store: s, Workers: cfg.concurrency, Logger: cfg.log,
		Agents: []*belay.Agent{benchAgent(cfg.steps, cfg.modelLatency, answered.done)}})
	if err != nil {
		return keysResult{}, fmt.Errorf("bench: %w", err)
	}
	keyOf := map[string]string{}
	for i := range cfg.runs {
		key := "order-" + strconv.Itoa(i%keys)
		run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "bench", Input: "bench run " + strconv.Itoa(i), ConcurrencyKey: key})
		if err != nil {
			return keysResult{}, fmt.Errorf("bench: create runs: %w", err)
		}
		keyOf[run.ID] = key
	}
	elapsed, err := runAll(ctx, rt, s, answered)
	if err != nil {
		return keysResult{}, err
	}
	byKey := map[string][]hold{}
	holds := 0
	for id, key := range keyOf {
		hs, err := holdsOf(ctx, s, id)
		if err != nil {
			return keysResult{}, err
		}
		holds += len(hs)
		byKey[key] = append(byKey[key], hs...)
	}
	overlaps := 0
	for _, hs := range byKey {
		slices.SortFunc(hs, func(a, b hold) int { return a.start.Compare(b.start) })
		for i := range hs {
			for j := i + 1; j < len(hs) && hs[j].start.Before(hs[i].end); j++ {
				overlaps++
			}
		}
	}
	return keysResult{Scenario: "keys", Store: kind, Runs: cfg.runs, Keys: keys, Concurrency: cfg.concurrency,
		Seconds: round(elapsed.Seconds(), 3), Holds: holds, Overlaps: overlaps}, nil
}

// hold is a span in which a run was in a step: from a claim to the stop or
// release after it.
type hold struct{ start, end time.Time }

// holdsOf reads a run's holds from its trace.
func holdsOf(ctx context.Context, s store.Store, runID string) ([]hold, error) {
	es, err := s.Events(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("bench: trace of %s: %w", runID, err)
	}
	var hs []hold
	var open *hold
	for _, e := range es {
		switch e.Type {
		case store.EventClaimed:
			open = &hold{start: e.Time}
		case store.EventStop, store.EventReleased:
			if open != nil {
				open.end = e.Time
				hs = append(hs, *open)
				open = nil
			}
		}
	}
	return hs, nil
}

// runAll starts rt, waits until every run has answered and none is busy,
// and stops it; it returns the time from start to the last run's end.
func runAll(ctx context.Context, rt *belay.Runtime, s store.Store, answered *countdown) (time.Duration, error) {
	start := time.Now()
	if err := rt.Start(ctx); err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	waitErr := waitRuns(ctx, s, answered.zero)
	elapsed := time.Since(start)
	stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := rt.Stop(stopCtx); err != nil {
		return 0, fmt.Errorf("bench: stop runtime: %w", err)
	}
	if waitErr != nil {
		return 0, fmt.Errorf("bench: wait for runs: %w", waitErr)
	}
	return elapsed, nil
}

// fairnessResult is what `belay bench --scenario fairness --json` prints.
type fairnessResult struct {
	Scenario    string  `json:"scenario"`
	Store       string  `json:"store"`
	Backlog     int     `json:"backlog"`
	Late        int     `json:"late"`
	Concurrency int     `json:"concurrency"`
	StepsPerRun int     `json:"steps_per_run"`
	StepsPerSec float64 `json:"steps_per_sec"`
	// WaitP50MS and WaitP99MS are tenant B's waits, from its run's
	// creation to the claim that starts it.
	WaitP50MS float64 `json:"wait_p50_ms"`
	WaitP99MS float64 `json:"wait_p99_ms"`
	WaitMaxMS float64 `json:"wait_max_ms"`
	// BacklogLeft is how many of tenant A's runs were still queued when
	// B's last run started: B did not wait for A's backlog.
	BacklogLeft int `json:"backlog_left"`
}

func (r fairnessResult) print(w io.Writer) {
	fmt.Fprintf(w, "belay bench --scenario fairness: tenant A with %d queued runs, tenant B starts %d, concurrency %d, store %s\n\n",
		r.Backlog, r.Late, r.Concurrency, r.Store)
	fmt.Fprintf(w, "  B's wait to its first step   p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", r.WaitP50MS, r.WaitP99MS, r.WaitMaxMS)
	fmt.Fprintf(w, "  A's runs still queued then   %d\n", r.BacklogLeft)
	fmt.Fprintf(w, "  throughput                   %.1f durable steps/s\n", r.StepsPerSec)
}

// benchFairness queues backlog runs of tenant A, starts the workers, and
// once they are busy with A's runs starts late runs of tenant B, timing
// each from its creation to its claim. It stops once B's runs have all
// started: A's backlog is not waited out.
func benchFairness(ctx context.Context, cfg benchConfig, backlog, late int) (fairnessResult, error) {
	s, kind, cleanup, err := openBenchStore(ctx, cfg)
	if err != nil {
		return fairnessResult{}, err
	}
	defer cleanup()
	rec := newStepRecorder(0)
	rt, err := belay.New(belay.Config{Store: s, Workers: cfg.concurrency, Logger: cfg.log, StepObserver: rec.observe,
		Agents: []*belay.Agent{benchAgent(cfg.steps, cfg.modelLatency, func() {})}})
	if err != nil {
		return fairnessResult{}, fmt.Errorf("bench: %w", err)
	}
	for i := range backlog {
		if _, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "bench", Tenant: "tenant-a", Input: "a " + strconv.Itoa(i)}); err != nil {
			return fairnessResult{}, fmt.Errorf("bench: create runs: %w", err)
		}
	}
	start := time.Now()
	if err := rt.Start(ctx); err != nil {
		return fairnessResult{}, fmt.Errorf("bench: %w", err)
	}
	stop := func() error {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		return rt.Stop(stopCtx)
	}
	// The workers are busy with A's runs: every worker has one.
	for rec.n.Load() < int64(cfg.concurrency) {
		if err := sleepCtx(ctx, time.Millisecond); err != nil {
			_ = stop()
			return fairnessResult{}, err
		}
	}
	var ids []string
	for i := range late {
		run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "bench", Tenant: "tenant-b", Input: "b " + strconv.Itoa(i)})
		if err != nil {
			_ = stop()
			return fairnessResult{}, fmt.Errorf("bench: create runs: %w", err)
		}
		ids = append(ids, run.ID)
	}
	var waits []time.Duration
	for len(waits) < late {
		waits = waits[:0]
		for _, id := range ids {
			hs, err := holdsOfOrOpen(ctx, s, id)
			if err != nil {
				_ = stop()
				return fairnessResult{}, err
			}
			run, err := s.GetRun(ctx, "", id)
			if err != nil {
				_ = stop()
				return fairnessResult{}, err
			}
			if !hs.IsZero() {
				waits = append(waits, hs.Sub(run.CreatedAt))
			}
		}
		if len(waits) < late {
			if err := sleepCtx(ctx, 5*time.Millisecond); err != nil {
				_ = stop()
				return fairnessResult{}, err
			}
		}
	}
	left, err := s.ListRuns(ctx, store.ListRunsParams{Tenant: "tenant-a", Status: store.StatusQueued, Limit: backlog})
	elapsed := time.Since(start)
	steps := rec.n.Load()
	if err := stop(); err != nil {
		return fairnessResult{}, fmt.Errorf("bench: stop runtime: %w", err)
	}
	if err != nil {
		return fairnessResult{}, fmt.Errorf("bench: %w", err)
	}
	slices.Sort(waits)
	pct := func(p float64) time.Duration { return waits[min(len(waits)-1, int(p*float64(len(waits))))] }
	return fairnessResult{Scenario: "fairness", Store: kind, Backlog: backlog, Late: late, Concurrency: cfg.concurrency,
		StepsPerRun: cfg.steps, StepsPerSec: round(float64(steps)/elapsed.Seconds(), 1),
		WaitP50MS: round(ms(pct(0.50)), 1), WaitP99MS: round(ms(pct(0.99)), 1), WaitMaxMS: round(ms(waits[len(waits)-1]), 1),
		BacklogLeft: len(left)}, nil
}

// holdsOfOrOpen returns the time of a run's first claim, or zero if it has
// none yet.
func holdsOfOrOpen(ctx context.Context, s store.Store, runID string) (time.Time, error) {
	es, err := s.Events(ctx, runID)
	if err != nil {
		return time.Time{}, fmt.Errorf("bench: trace of %s: %w", runID, err)
	}
	for _, e := range es {
		if e.Type == store.EventClaimed {
			return e.Time, nil
		}
	}
	return time.Time{}, nil
}
