package guard

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The stuck-loop experiment of the source text, run on Belay's detectors:
// four kinds of stuck run and a healthy one that retries a read about a
// quarter of the time, 400 runs of each, 16 turns a run.

const (
	nTurns      = 16
	runsPerKind = 400
)

var (
	kinds      = []string{"exact", "reworded", "cycle", "drift", "healthy"}
	stuckKinds = kinds[:4]
)

// genRun is one generated run and the turn its loop starts on.
type genRun struct {
	start int
	calls []Call
}

// makeRun mirrors the text's make_run.
func makeRun(kind string, rng *numpyRNG) genRun {
	start := rng.Integers(2, 6)
	calls := make([]Call, 0, nTurns)
	call := func(tool, args string, fact bool) {
		calls = append(calls, Call{Tool: tool, Args: []byte(args), NewFact: fact})
	}
	for t := range start {
		call("get_order", fmt.Sprintf(`{"id":"A-%d"}`, t), true)
	}
	for t := start; t < nTurns; t++ {
		i := t - start
		switch kind {
		case "exact":
			call("search", `{"q":"refund policy"}`, false)
		case "reworded":
			q := []string{"refund policy", "Refund Policy", "policy refund", "REFUND POLICY"}[i%4]
			call("search", fmt.Sprintf(`{"q":%q}`, q), false)
		case "cycle":
			if i%2 == 0 {
				call("search", `{"q":"refund"}`, false)
			} else {
				call("read_doc", `{"id":"POL-14"}`, false)
			}
		case "drift":
			call("search", fmt.Sprintf(`{"q":"refund question %d"}`, i), false)
		default: // healthy, with a legitimate retry
			retry := rng.Float64() < 0.25
			id := t
			if retry {
				id--
			}
			call("get_order", fmt.Sprintf(`{"id":"A-%d"}`, id), !retry)
		}
	}
	return genRun{start: start, calls: calls}
}

// firstFiring mirrors the text's detect: the 0-based turn the detector first
// fires on, or -1.
func firstFiring(d Detector, calls []Call) int {
	var s State
	for t, c := range calls {
		if d.Observe(&s, c) {
			return t
		}
	}
	return -1
}

// generateRuns draws the runs as the text does, from numpy's
// default_rng(0): the same generator, the same detectors and the same random
// numbers give the text's table to the run. The healthy column is a sampled
// rate: its expectation is 97.1% for the window detector (1 - the mean over
// start in 2..5 of 0.75^(16-start), the chance of no retry) and 2.9% for
// progress (four retries in a row); another stream, such as Go's PCG, draws
// other runs and prints 97% and 3% where the text's draw (391 and 7 of 400)
// prints 98% and 2%. Three of the medians sit on a knife edge too: exact
// fires at start+2 with start uniform in 2..5, so its median over 400 runs
// is 6.0 only if fewer than 200 of them start at 2 or 3, and 5.0 (or 5.5)
// otherwise, an even chance for any draw; likewise canonical and progress.
// The per-run firing turns checked against start in TestDetectorTable are
// what holds for every draw.
func generateRuns() map[string][]genRun {
	rng := newNumpyRNG(0)
	runs := make(map[string][]genRun, len(kinds))
	for _, k := range kinds {
		for range runsPerKind {
			runs[k] = append(runs[k], makeRun(k, rng))
		}
	}
	return runs
}

func median(xs []int) float64 {
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return float64(s[n/2])
	}
	return float64(s[n/2-1]+s[n/2]) / 2
}

func TestDetectorTable(t *testing.T) {
	t.Parallel()
	runs := generateRuns()
	// at[mode][kind][n] is the turn the detector first fires on in run n.
	at := map[Mode]map[string][]int{}
	for _, m := range modes {
		at[m] = map[string][]int{}
		for _, k := range kinds {
			for _, r := range runs[k] {
				at[m][k] = append(at[m][k], firstFiring(Detector{Mode: m}, r.calls))
			}
		}
	}

	// rate[mode][kind] is the share of runs, in percent, the detector fires on.
	rate := map[Mode]map[string]float64{}
	var b strings.Builder
	fmt.Fprintf(&b, "\n%-12s", "detector")
	for _, k := range kinds {
		fmt.Fprintf(&b, "%11s", k)
	}
	b.WriteByte('\n')
	for _, m := range modes {
		rate[m] = map[string]float64{}
		fmt.Fprintf(&b, "%-12s", m)
		for _, k := range kinds {
			hits := 0
			for _, a := range at[m][k] {
				if a >= 0 {
					hits++
				}
			}
			rate[m][k] = 100 * float64(hits) / float64(len(runs[k]))
			fmt.Fprintf(&b, "%10s ", fmt.Sprintf("%.0f%%", rate[m][k]))
		}
		b.WriteByte('\n')
	}
	t.Log(b.String())

	// The text prints each rate rounded to a whole percent: a rate matches
	// when it prints as the text's does, 98% being anything from 97.5% up
	// to 98.5%.
	want := map[Mode][]string{
		Exact:     {"100%", "0%", "0%", "0%", "0%"},
		Canonical: {"100%", "100%", "0%", "0%", "0%"},
		Window:    {"100%", "100%", "100%", "0%", "98%"},
		Progress:  {"100%", "100%", "100%", "100%", "2%"},
	}
	for _, m := range modes {
		for i, k := range kinds {
			if got := fmt.Sprintf("%.0f%%", rate[m][k]); got != want[m][i] {
				t.Errorf("%s on %s runs: fires on %.2f%%, which prints as %s; the text prints %s", m, k, rate[m][k], got, want[m][i])
			}
			// A stuck column does not depend on the draw: a detector
			// catches every run of the kind or none.
			if k != "healthy" && rate[m][k] != 0 && rate[m][k] != 100 {
				t.Errorf("%s on %s runs: fires on %.2f%%, want all or none", m, k, rate[m][k])
			}
		}
	}

	// Where each detector fires on a stuck run, relative to the turn the
	// loop starts on, from the text's definitions: this holds for every run
	// whatever the seed, and the medians below are made of it.
	offset := map[Mode]map[string]int{
		Exact:     {"exact": 2},
		Canonical: {"exact": 2, "reworded": 2},
		Window:    {"exact": 1, "reworded": 4, "cycle": 2},
		Progress:  {"exact": 3, "reworded": 3, "cycle": 3, "drift": 3},
	}
	b.Reset()
	b.WriteString("\nmedian turn the detector fires on a stuck run (16-turn runs):\n")
	medians := map[Mode]float64{}
	counts := map[Mode]int{}
	for _, m := range modes {
		var fired []int
		for _, k := range stuckKinds {
			for n, r := range runs[k] {
				a := at[m][k][n]
				if off, ok := offset[m][k]; ok && a != r.start+off {
					t.Fatalf("%s on a %s run starting at turn %d fired at %d, want %d", m, k, r.start, a, r.start+off)
				}
				if a >= 0 {
					fired = append(fired, a)
				}
			}
		}
		medians[m], counts[m] = median(fired), len(fired)
		fmt.Fprintf(&b, " %-10s%5.1f fired on %d of %d stuck runs\n", m, medians[m], len(fired), len(stuckKinds)*runsPerKind)
	}
	t.Log(b.String())

	wantMedian := map[Mode]float64{Exact: 6, Canonical: 6, Window: 6, Progress: 7}
	wantCount := map[Mode]int{Exact: 400, Canonical: 800, Window: 1200, Progress: 1600}
	for _, m := range modes {
		if medians[m] != wantMedian[m] || counts[m] != wantCount[m] {
			t.Errorf("%s: median %.1f on %d runs, want %.1f on %d", m, medians[m], counts[m], wantMedian[m], wantCount[m])
		}
	}
}
