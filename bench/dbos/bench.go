package main

import (
	"bufio"
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
)

// bench is the workflow and what it records.
type bench struct {
	// overheads holds each step's overhead, in the order steps end.
	overheads []time.Duration
	n         atomic.Int64
}

// workflow runs steps no-op durable steps, as DBOS's docs write a
// workflow: each step is a function given to dbos.RunAsStep. A step's
// overhead is the time RunAsStep takes minus the time its function takes
// (reading whether the step already ran, writing its output), as belay
// bench's is a step's time minus its model's and tools'.
func (b *bench) workflow(ctx dbos.Context, steps int) (int, error) {
	for i := range steps {
		var work time.Duration
		start := time.Now()
		out, err := dbos.RunAsStep(ctx, func(context.Context) (int, error) {
			t := time.Now()
			defer func() { work = time.Since(t) }()
			return i, nil
		}, dbos.WithStepName("noop"))
		total := time.Since(start)
		if err != nil {
			return i, err
		}
		if out != i {
			return i, fmt.Errorf("step %d returned %d", i, out)
		}
		if j := b.n.Add(1) - 1; j < int64(len(b.overheads)) {
			b.overheads[j] = total - work
		}
	}
	return steps, nil
}

// percentiles returns the 50th and 99th percentile (nearest rank) of the
// steps recorded, as belay bench computes its own.
func (b *bench) percentiles() (p50, p99 time.Duration) {
	d := b.overheads[:min(int(b.n.Load()), len(b.overheads))]
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	rank := func(q float64) time.Duration { return d[max(0, int(math.Ceil(q*float64(len(d))))-1)] }
	return rank(0.50), rank(0.99)
}

// runBench launches DBOS on a new system database, runs the workflows and
// measures.
//
// What is timed: from the first workflow's start until the last one's
// result, with cfg.concurrency goroutines each starting a workflow
// (dbos.RunWorkflow) and waiting for its result (GetResult), then the next:
// the way DBOS's docs run a workflow, cfg.concurrency at a time. Starting a
// workflow writes its status row, so DBOS's time includes creating its
// runs, where belay bench creates its runs before it starts timing. Belay's
// figure is the more favourable to Belay by that one write a run (K steps
// share it).
func runBench(ctx context.Context, cfg config, log quietable) (result, error) {
	sys, err := openSystemDB(ctx, cfg)
	if err != nil {
		return result{}, err
	}
	defer sys.cleanup()

	dc, err := dbos.NewContext(ctx, dbos.Config{
		AppName:        "belay-bench-dbos",
		DatabaseURL:    sys.url,
		SQLiteSystemDB: sys.sqlite,
		DatabaseSchema: sys.schema,
		Logger:         slog.New(log),
	})
	if err != nil {
		return result{}, fmt.Errorf("dbos: %w", err)
	}
	b := &bench{overheads: make([]time.Duration, cfg.runs*cfg.steps)}
	dbos.RegisterWorkflow(dc, b.workflow, dbos.WithWorkflowName("bench"))
	if err := dbos.Launch(dc); err != nil {
		_ = dbos.Shutdown(dc, 10*time.Second)
		return result{}, fmt.Errorf("dbos: launch: %w", err)
	}
	shut := func() error {
		if dc == nil {
			return nil
		}
		log.quiet.Store(true)
		err := dbos.Shutdown(dc, 10*time.Second)
		dc = nil
		return err
	}
	defer shut()

	var nonce [4]byte
	_, _ = cryptorand.Read(nonce[:])
	prefix := "bench-" + hex.EncodeToString(nonce[:]) + "-"
	errs := make([]error, cfg.runs)
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range min(cfg.runs, cfg.concurrency) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= cfg.runs || ctx.Err() != nil {
					return
				}
				h, err := dbos.RunWorkflow(dc, b.workflow, cfg.steps, dbos.WithWorkflowID(prefix+strconv.Itoa(i)))
				if err != nil {
					errs[i] = err
					continue
				}
				if n, err := h.GetResult(); err != nil {
					errs[i] = err
				} else if n != cfg.steps {
					errs[i] = fmt.Errorf("workflow %s ran %d steps, not %d", h.GetWorkflowID(), n, cfg.steps)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	if err := errors.Join(errs...); err != nil {
		return result{}, fmt.Errorf("dbos: workflows: %w", err)
	}
	if err := checkWorkflows(dc, prefix, cfg); err != nil {
		return result{}, err
	}
	if err := shut(); err != nil {
		return result{}, fmt.Errorf("dbos: shutdown: %w", err)
	}
	size, err := sys.size(ctx)
	if err != nil {
		return result{}, err
	}

	steps := cfg.runs * cfg.steps
	p50, p99 := b.percentiles()
	return result{
		System:         "dbos-transact-golang",
		Version:        dbosVersion(),
		Runs:           cfg.runs,
		StepsPerRun:    cfg.steps,
		Concurrency:    cfg.concurrency,
		Store:          cfg.store,
		Steps:          steps,
		Seconds:        round(elapsed.Seconds(), 6),
		StepsPerSec:    round(float64(steps)/elapsed.Seconds(), 1),
		OverheadP50MS:  round(ms(p50), 3),
		OverheadP99MS:  round(ms(p99), 3),
		DBBytesPerStep: round(float64(size)/float64(steps), 1),
		PeakRSSMB:      round(peakRSSMB(), 1),
	}, nil
}

// checkWorkflows fails unless every workflow is recorded as a success with
// exactly cfg.steps steps, as belay bench checks its runs. It is not timed.
func checkWorkflows(dc dbos.Context, prefix string, cfg config) error {
	done, err := dbos.ListWorkflows(dc,
		dbos.WithFilterWorkflowIDPrefix(prefix),
		dbos.WithFilterStatus(dbos.WorkflowStatusSuccess),
		dbos.WithFilterLoadInput(false),
		dbos.WithFilterLoadOutput(false))
	if err != nil {
		return fmt.Errorf("dbos: list workflows: %w", err)
	}
	if len(done) != cfg.runs {
		return fmt.Errorf("dbos: %d of %d workflows are recorded as a success", len(done), cfg.runs)
	}
	for _, w := range done {
		steps, err := dbos.GetWorkflowSteps(dc, w.ID, dbos.WithStepsLoadOutput(false))
		if err != nil {
			return fmt.Errorf("dbos: steps of %s: %w", w.ID, err)
		}
		if len(steps) != cfg.steps {
			return fmt.Errorf("dbos: workflow %s recorded %d steps, not %d", w.ID, len(steps), cfg.steps)
		}
	}
	return nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func round(x float64, decimals int) float64 {
	p := math.Pow(10, float64(decimals))
	return math.Round(x*p) / p
}

// peakRSSMB is the process's peak resident memory, from /proc (Linux);
// elsewhere 0.
func peakRSSMB() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
		if err == nil {
			return kb / 1024
		}
	}
	return 0
}
