// Command buildweight says where a Go build spent its time: it reads the
// action graph `go build -debug-actiongraph=FILE` writes and prints the
// compile time of the build's packages by module, the heaviest first.
// Run it on a cold build (GOCACHE=$(mktemp -d)), where every package is
// compiled; see the README's "Build weight".
//
//	go run ./internal/buildweight [-top N] [-match REGEXP] FILE
//
// -match adds up the packages whose path matches, wherever they are.
package main

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

// action is the part of an action graph node read here.
type action struct {
	Mode      string
	Package   string
	TimeStart time.Time
	TimeDone  time.Time
}

func main() {
	top := flag.Int("top", 12, "modules to list")
	match := flag.String("match", "", "also add up the packages whose import path matches this regular expression")
	flag.Parse()
	matching, err := regexp.Compile(*match)
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildweight: -match:", err)
		os.Exit(2)
	}
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: go run ./internal/buildweight [-top N] FILE (an action graph: go build -debug-actiongraph=FILE)")
		os.Exit(2)
	}
	raw, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildweight:", err)
		os.Exit(1)
	}
	var actions []action
	if err := json.Unmarshal(raw, &actions); err != nil {
		fmt.Fprintln(os.Stderr, "buildweight: not an action graph:", err)
		os.Exit(1)
	}
	byModule := map[string]time.Duration{}
	packages := map[string]int{}
	var total, matched time.Duration
	nMatched := 0
	for _, a := range actions {
		if a.Mode != "build" || a.TimeStart.IsZero() || a.TimeDone.IsZero() {
			continue
		}
		d := a.TimeDone.Sub(a.TimeStart)
		m := module(a.Package)
		byModule[m] += d
		packages[m]++
		total += d
		if *match != "" && matching.MatchString(a.Package) {
			matched += d
			nMatched++
		}
	}
	mods := make([]string, 0, len(byModule))
	for m := range byModule {
		mods = append(mods, m)
	}
	slices.SortFunc(mods, func(a, b string) int { return cmp.Compare(byModule[b], byModule[a]) })
	n := 0
	for _, c := range packages {
		n += c
	}
	fmt.Printf("%d packages compiled in %.0f s of compile time (all cores)\n", n, total.Seconds())
	for _, m := range mods[:min(*top, len(mods))] {
		fmt.Printf("  %6.0f s  %4.1f%%  %3d packages  %s\n", byModule[m].Seconds(), 100*byModule[m].Seconds()/total.Seconds(), packages[m], m)
	}
	if *match != "" {
		fmt.Printf("matching %s: %d packages, %.0f s (%.1f%%)\n", *match, nMatched, matched.Seconds(), 100*matched.Seconds()/total.Seconds())
	}
}

// module names a package's module as far as its path tells: the standard
// library, or the first three elements of a path whose first has a dot.
func module(pkg string) string {
	parts := strings.Split(pkg, "/")
	if !strings.Contains(parts[0], ".") {
		return "std"
	}
	return strings.Join(parts[:min(3, len(parts))], "/")
}
