package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/belayrun/belay"
)

// What belay bench measures with: the overhead of each step, a progress bar,
// and the process's memory.

// stepRecorder collects the overhead of every step from the runtime's
// StepObserver, which runs on the workers' goroutines.
type stepRecorder struct {
	n         atomic.Int64
	overheads []time.Duration
}

func newStepRecorder(steps int) *stepRecorder {
	return &stepRecorder{overheads: make([]time.Duration, steps)}
}

func (r *stepRecorder) observe(t belay.StepTiming) {
	i := r.n.Add(1) - 1
	if i < int64(len(r.overheads)) {
		r.overheads[i] = t.Total - t.Model - t.Tools
	}
}

// percentiles returns the 50th and 99th percentile (nearest rank) of the
// steps observed. Call it once the runtime has stopped.
func (r *stepRecorder) percentiles() (p50, p99 time.Duration) {
	d := r.overheads[:min(int(r.n.Load()), len(r.overheads))]
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	rank := func(q float64) time.Duration { return d[max(0, int(math.Ceil(q*float64(len(d))))-1)] }
	return rank(0.50), rank(0.99)
}

// startProgress draws a progress bar on w until the returned function is
// called. With w nil it draws nothing.
func startProgress(w io.Writer, done *atomic.Int64, total int) (stop func()) {
	if w == nil {
		return func() {}
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	start := time.Now()
	draw := func() {
		n := min(int(done.Load()), total)
		const width = 30
		filled := width * n / total
		fmt.Fprintf(w, "\r\033[Kbench [%s%s] %d/%d steps %.1fs", strings.Repeat("#", filled),
			strings.Repeat(".", width-filled), n, total, time.Since(start).Seconds())
	}
	wg.Go(func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				draw()
			}
		}
	})
	return func() {
		close(quit)
		wg.Wait()
		fmt.Fprint(w, "\r\033[K")
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTTY(f)
}

// peakRSSMB is the process's peak resident memory. Linux reports it in
// /proc; elsewhere the memory the Go runtime holds now stands in for it,
// which leaves out SQLite's own allocations.
func peakRSSMB() float64 {
	if f, err := os.Open("/proc/self/status"); err == nil {
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
	}
	sample := []metrics.Sample{
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
	}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 || sample[1].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return float64(sample[0].Value.Uint64()-sample[1].Value.Uint64()) / (1 << 20)
}
