package main

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// belay bench --timers N measures timers: N runs sleep on the store's timer
// (a run asked for later, RunRequest.NotBefore, is paused until then, as a
// run whose tool said ResumeAfter is) a day away, a worker runs over them in
// a process of its own, and --resumes more runs come due a few seconds
// later, one every 20 ms. Each due run's lateness is from its time to the
// worker's claim of it, by the worker's clock: what the issue asks is that
// it stays within one claim interval (the worker's poll) with N timers
// pending.

// timersResult is what `belay bench --timers N --json` prints.
type timersResult struct {
	Store        string  `json:"store"`
	Timers       int     `json:"timers"`
	FillSeconds  float64 `json:"fill_seconds"`
	RSSMB        float64 `json:"rss_mb"`
	Due          int     `json:"due"`
	LateP50MS    float64 `json:"late_p50_ms"`
	LateP99MS    float64 `json:"late_p99_ms"`
	LateMaxMS    float64 `json:"late_max_ms"`
	WorkerPollMS float64 `json:"worker_poll_ms"`
	// WithinPoll counts the due runs claimed within one poll of their
	// time.
	WithinPoll int `json:"within_poll"`
}

func (r timersResult) print(w io.Writer) {
	fmt.Fprintf(w, "%d runs sleeping on timers a day away (%s), made in %.1f s; worker RSS %.1f MB\n", r.Timers, r.Store, r.FillSeconds, r.RSSMB)
	fmt.Fprintf(w, "%d timers come due meanwhile: fired late by p50 %.1f ms, p99 %.1f ms, max %.1f ms; %d of %d within the worker's poll of %.0f ms\n",
		r.Due, r.LateP50MS, r.LateP99MS, r.LateMaxMS, r.WithinPoll, r.Due, r.WorkerPollMS)
}

// timersAgent's runs answer in one step: what is measured is when they
// start.
func timersAgent() *belay.Agent {
	return &belay.Agent{Name: "bench", Prices: scripted.Prices, Model: scripted.New(scripted.Reply{Text: "on time"})}
}

// benchDueSpacing spaces the due runs' times, as timers set by different
// runs fall.
const benchDueSpacing = 20 * time.Millisecond

func benchTimers(ctx context.Context, cfg benchConfig, timers, due int) (timersResult, error) {
	if cfg.url != "" {
		cfg.schema = newBenchSchema()
	}
	s, kind, cleanup, err := openBenchStore(ctx, cfg)
	if err != nil {
		return timersResult{}, err
	}
	defer cleanup()
	res := timersResult{Store: kind, Timers: timers, WorkerPollMS: ms(200 * time.Millisecond)}
	rt, err := belay.New(belay.Config{Store: s, Agents: []*belay.Agent{timersAgent()}, Logger: cfg.log})
	if err != nil {
		return timersResult{}, fmt.Errorf("bench: %w", err)
	}
	start := time.Now()
	if _, err := createTimerRuns(ctx, rt, timers, cfg.concurrency, func(int) time.Time { return start.Add(24 * time.Hour) }); err != nil {
		return timersResult{}, err
	}
	res.FillSeconds = round(time.Since(start).Seconds(), 3)

	worker, err := startBenchWorker(ctx, cfg, "--agent", "timers")
	if err != nil {
		return timersResult{}, err
	}
	defer worker.stop()
	// The due runs are made before any comes due, so their making is not
	// in the way of the worker's claims.
	first := time.Now().Add(3*time.Second + time.Duration(due)*time.Millisecond)
	at := func(i int) time.Time { return first.Add(time.Duration(i) * benchDueSpacing) }
	ids, err := createTimerRuns(ctx, rt, due, cfg.concurrency, at)
	if err != nil {
		return timersResult{}, err
	}
	if time.Now().After(first) {
		return timersResult{}, errors.New("bench: the due runs took longer to make than they had before their time; pass a smaller --resumes")
	}
	var late []time.Duration
	for i, id := range ids {
		claimed, err := awaitClaims(ctx, s, id, 1, time.Until(at(i))+30*time.Second)
		if err != nil {
			return timersResult{}, err
		}
		late = append(late, claimed.Sub(at(i)))
	}
	res.RSSMB = round(processRSSMB(worker.cmd.Process.Pid), 1)
	slices.Sort(late)
	n := len(late)
	res.Due = n
	res.LateP50MS = round(ms(late[n/2]), 2)
	res.LateP99MS = round(ms(late[min(n-1, n*99/100)]), 2)
	res.LateMaxMS = round(ms(late[n-1]), 2)
	for _, l := range late {
		if l <= 200*time.Millisecond {
			res.WithinPoll++
		}
	}
	return res, nil
}

// createTimerRuns creates n runs of the bench agent, the i-th asked for at
// notBefore(i), and returns their ids in i's order.
func createTimerRuns(ctx context.Context, rt *belay.Runtime, n, workers int, notBefore func(i int) time.Time) ([]string, error) {
	var nonce [4]byte
	_, _ = cryptorand.Read(nonce[:])
	prefix := "timer-" + hex.EncodeToString(nonce[:]) + "-"
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
				run, _, err := rt.StartRun(ctx, belay.RunRequest{Agent: "bench", ClientRequestID: prefix + strconv.Itoa(i),
					Input: "timer " + strconv.Itoa(i), NotBefore: notBefore(i)})
				ids[i], errs[i] = run.ID, err
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("bench: create runs: %w", err)
	}
	return ids, ctx.Err()
}

// awaitClaims waits until a worker has claimed the run n times, and returns
// when it did the n-th by the worker's clock (the claimed event's time).
func awaitClaims(ctx context.Context, s store.Store, runID string, n int, within time.Duration) (time.Time, error) {
	deadline := time.Now().Add(within)
	for {
		events, err := s.Events(ctx, runID)
		if err != nil {
			return time.Time{}, fmt.Errorf("bench: %w", err)
		}
		claims := 0
		for _, ev := range events {
			if ev.Type == store.EventClaimed {
				if claims++; claims == n {
					return ev.Time, nil
				}
			}
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("bench: run %s not claimed %d times within %s", runID, n, within)
		}
		if err := sleepCtx(ctx, time.Millisecond); err != nil {
			return time.Time{}, err
		}
	}
}
