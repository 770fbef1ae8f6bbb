package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// belay bench --takeover measures how long runs wait for another worker when
// theirs stops: worker A executes the runs in a process of its own, worker B
// waits beside it in another, and A is killed with SIGKILL in the middle of
// its steps; the time from the kill until B has claimed each run is timed
// from this process, which reads the store. B proves a dead process on its
// own host gone and takes its runs at once (at its next sweep); then B is
// frozen with SIGSTOP, a frozen process cannot be proven gone, and C takes
// the runs once their leases run out.

// takeoverResult is what `belay bench --takeover --json` prints.
type takeoverResult struct {
	Store      string  `json:"store"`
	Runs       int     `json:"runs"`
	LeaseTTLMS float64 `json:"lease_ttl_ms"`
	// Killed: the times from A's SIGKILL until B claimed each run.
	KilledP50MS float64 `json:"killed_p50_ms"`
	KilledP99MS float64 `json:"killed_p99_ms"`
	KilledMaxMS float64 `json:"killed_max_ms"`
	// Frozen: the times from B's SIGSTOP until C claimed each run.
	FrozenP50MS float64 `json:"frozen_p50_ms"`
	FrozenP99MS float64 `json:"frozen_p99_ms"`
	FrozenMaxMS float64 `json:"frozen_max_ms"`
	// SweepMS is how often a worker looks for runs of dead owners.
	SweepMS float64 `json:"sweep_ms"`
	// Refrozen counts the times B was found stopped holding the SQLite
	// file's write lock, let go on and stopped again: a process stopped in
	// one of its writes holds up every other process's until it continues.
	Refrozen int `json:"refrozen,omitempty"`
}

func (r takeoverResult) print(w io.Writer) {
	fmt.Fprintf(w, "%d runs mid-step (%s), lease %.0f ms\n", r.Runs, r.Store, r.LeaseTTLMS)
	fmt.Fprintf(w, "worker killed (SIGKILL), another on its host takes its runs: p50 %.0f ms, p99 %.0f ms, max %.0f ms (it looks for dead owners every %.0f ms)\n",
		r.KilledP50MS, r.KilledP99MS, r.KilledMaxMS, r.SweepMS)
	fmt.Fprintf(w, "worker frozen (SIGSTOP), another takes its runs once their leases run out: p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
		r.FrozenP50MS, r.FrozenP99MS, r.FrozenMaxMS)
	if r.Refrozen > 0 {
		fmt.Fprintf(w, "(stopped again %d times: it was stopped holding the SQLite file's write lock, which holds up every other process's writes)\n", r.Refrozen)
	}
}

type takeoverConfig struct {
	benchConfig
	ttl time.Duration
}

// takeoverSteps is how many steps a run of the takeover bench takes: more
// than it can finish while it is measured, so every run is always mid-run.
const takeoverSteps = 1_000_000

func takeoverAgent(latency time.Duration) *belay.Agent {
	return benchAgent(takeoverSteps, latency, func() {})
}

func benchTakeover(ctx context.Context, cfg takeoverConfig) (takeoverResult, error) {
	if cfg.url != "" {
		// The workers open the same schema.
		cfg.schema = newBenchSchema()
	}
	if cfg.modelLatency == 0 {
		// Runs that take their time over each step, so that a worker is
		// stopped in the middle of one.
		cfg.modelLatency = 20 * time.Millisecond
	}
	s, kind, cleanup, err := openBenchStore(ctx, cfg.benchConfig)
	if err != nil {
		return takeoverResult{}, err
	}
	defer cleanup()
	res := takeoverResult{Store: kind, Runs: cfg.runs, LeaseTTLMS: ms(cfg.ttl), SweepMS: ms(5 * 200 * time.Millisecond)}

	rt, err := belay.New(belay.Config{Store: s, Agents: []*belay.Agent{takeoverAgent(cfg.modelLatency)}, Logger: cfg.log})
	if err != nil {
		return takeoverResult{}, fmt.Errorf("bench: %w", err)
	}
	ids, err := createBenchRuns(ctx, rt, cfg.runs, cfg.concurrency)
	if err != nil {
		return takeoverResult{}, err
	}
	worker := func() (*benchWorker, error) {
		return startBenchWorker(ctx, cfg.benchConfig, "--agent", "takeover", "--lease-ttl", cfg.ttl.String(),
			"--model-latency", cfg.modelLatency.String(), "--workers", fmt.Sprint(cfg.runs))
	}

	a, err := worker()
	if err != nil {
		return takeoverResult{}, err
	}
	defer a.stop()
	held, err := awaitHolder(ctx, s, ids, 60*time.Second)
	if err != nil {
		return takeoverResult{}, fmt.Errorf("bench: worker A: %w", err)
	}
	b, err := worker()
	if err != nil {
		return takeoverResult{}, err
	}
	defer b.stop()
	// Let A go on with its steps for a while, then kill it mid-step.
	if err := sleepCtx(ctx, time.Second); err != nil {
		return takeoverResult{}, err
	}
	killed := time.Now()
	if err := a.cmd.Process.Kill(); err != nil {
		return takeoverResult{}, fmt.Errorf("bench: kill worker A: %w", err)
	}
	lat, err := awaitTakeover(ctx, s, held, killed, cfg.ttl+30*time.Second)
	if err != nil {
		return takeoverResult{}, fmt.Errorf("bench: after worker A was killed: %w", err)
	}
	res.KilledP50MS, res.KilledP99MS, res.KilledMaxMS = percentiles(lat)

	c, err := worker()
	if err != nil {
		return takeoverResult{}, err
	}
	defer c.stop()
	held, err = awaitHolder(ctx, s, ids, 60*time.Second)
	if err != nil {
		return takeoverResult{}, fmt.Errorf("bench: worker B: %w", err)
	}
	if err := sleepCtx(ctx, time.Second); err != nil {
		return takeoverResult{}, err
	}
	frozen, err := freeze(ctx, b, cfg.path)
	if err != nil {
		return takeoverResult{}, err
	}
	res.Refrozen = frozen.tries - 1
	lat, err = awaitTakeover(ctx, s, held, frozen.at, cfg.ttl+30*time.Second)
	// B is killed while stopped (stop kills it): a frozen worker that
	// woke would find its leases taken, which is the zombie tests' matter.
	if err != nil {
		return takeoverResult{}, fmt.Errorf("bench: after worker B was frozen: %w", err)
	}
	res.FrozenP50MS, res.FrozenP99MS, res.FrozenMaxMS = percentiles(lat)
	return res, nil
}

// awaitHolder waits until every run of ids is running under a lease, and
// returns the lease each is held under.
func awaitHolder(ctx context.Context, s store.Store, ids []string, within time.Duration) (map[string]store.Run, error) {
	deadline := time.Now().Add(within)
	for {
		held := make(map[string]store.Run, len(ids))
		for _, id := range ids {
			r, err := s.GetRun(ctx, "", id)
			if err != nil {
				return nil, err
			}
			if r.Status == store.StatusRunning && r.LeaseOwner != "" && r.Step > 0 {
				held[id] = r
			}
		}
		if len(held) == len(ids) {
			return held, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d runs under a lease after %s", len(held), len(ids), within)
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// awaitTakeover times each run of held from since until a worker other than
// its holder has claimed it (a later epoch, another owner).
func awaitTakeover(ctx context.Context, s store.Store, held map[string]store.Run, since time.Time, within time.Duration) ([]time.Duration, error) {
	var lat []time.Duration
	left := make(map[string]store.Run, len(held))
	for id, r := range held {
		left[id] = r
	}
	deadline := since.Add(within)
	for len(left) > 0 {
		for id, was := range left {
			r, err := s.GetRun(ctx, "", id)
			if err != nil {
				return nil, err
			}
			if r.LeaseEpoch > was.LeaseEpoch && r.LeaseOwner != "" && r.LeaseOwner != was.LeaseOwner {
				lat = append(lat, time.Since(since))
				delete(left, id)
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d runs not taken over after %s", len(left), len(held), within)
		}
		if err := sleepCtx(ctx, time.Millisecond); err != nil {
			return nil, err
		}
	}
	return lat, nil
}

// frozenAt is when a worker was stopped for good, and in how many tries.
type frozenAt struct {
	at    time.Time
	tries int
}

// freeze stops w with SIGSTOP. On SQLite (path set), a worker stopped in
// the middle of one of its writes holds the file's write lock, and no other
// process writes until it continues: then w is let go on for a moment and
// stopped again, up to 10 times.
func freeze(ctx context.Context, w *benchWorker, path string) (frozenAt, error) {
	for tries := 1; tries <= 10; tries++ {
		at := time.Now()
		if err := stopProcess(w.cmd.Process); err != nil {
			return frozenAt{}, fmt.Errorf("bench: stop worker B: %w", err)
		}
		if path == "" {
			return frozenAt{at: at, tries: tries}, nil
		}
		free, err := writeLockFree(ctx, path)
		if err != nil {
			return frozenAt{}, err
		}
		if free {
			return frozenAt{at: at, tries: tries}, nil
		}
		if err := continueProcess(w.cmd.Process); err != nil {
			return frozenAt{}, fmt.Errorf("bench: let worker B go on: %w", err)
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return frozenAt{}, err
		}
	}
	return frozenAt{}, errors.New("bench: worker B was stopped holding the SQLite file's write lock 10 times")
}

// writeLockFree reports whether another connection can take the SQLite
// file's write lock within a second: it takes it and lets go at once.
func writeLockFree(ctx context.Context, path string) (bool, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(1000)")
	if err != nil {
		return false, fmt.Errorf("bench: %w", err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return false, fmt.Errorf("bench: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return false, nil
	}
	_, err = conn.ExecContext(ctx, "ROLLBACK")
	return true, err
}
