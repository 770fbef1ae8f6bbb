package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/belayrun/belay/store"
)

const tenantLimitUsage = `usage: belay tenant-limit [--tenant T [--max-running N] [--starts-per-minute R]] [--db PATH] [--json]

Caps how many runs of tenant T are in a step at once, across every worker of
the store: claims take none of T's queued runs while it has N running. With
--starts-per-minute, claims start at most R of T's queued runs a minute,
spread over the minute. A flag not given keeps its value; 0 removes a limit.
Without --tenant, lists the limits.`

const agentLimitUsage = `usage: belay agent-limit [--agent A [--max-running N] [--starts-per-minute R]] [--db PATH] [--json]

Caps how many runs of agent A (of every tenant) are in a step at once, across
every worker of the store, and with --starts-per-minute how many of its queued
runs start a minute. A flag not given keeps its value; 0 removes a limit. An
agent's MaxRunning and StartsPerMinute in Go, or max_running and
starts_per_minute in belay.yaml, are written when a worker starts. Without
--agent, lists the limits.`

// limitJSON is one tenant's or agent's limits as tenant-limit and
// agent-limit --json print them.
type limitJSON struct {
	Tenant          string  `json:"tenant,omitempty"`
	Agent           string  `json:"agent,omitempty"`
	MaxRunning      int     `json:"max_running"`
	StartsPerMinute float64 `json:"starts_per_minute,omitempty"`
}

// runTenantLimit sets or lists the caps and start rates of tenants.
func runTenantLimit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runLimit(ctx, args, stdout, limitCommand[store.TenantLimiter]{
		name: "tenant", usage: tenantLimitUsage,
		set: func(ctx context.Context, l store.TenantLimiter, name string, n int, r float64) error {
			return l.SetTenantLimit(ctx, store.TenantLimit{Tenant: name, MaxRunning: n, StartsPerMinute: r})
		},
		list: func(ctx context.Context, l store.TenantLimiter) ([]limitJSON, error) {
			ls, err := l.TenantLimits(ctx)
			out := make([]limitJSON, len(ls))
			for i, x := range ls {
				out[i] = limitJSON{Tenant: x.Tenant, MaxRunning: x.MaxRunning, StartsPerMinute: x.StartsPerMinute}
			}
			return out, err
		},
	})
}

// runAgentLimit sets or lists the caps and start rates of agents.
func runAgentLimit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runLimit(ctx, args, stdout, limitCommand[store.AgentLimiter]{
		name: "agent", usage: agentLimitUsage,
		set: func(ctx context.Context, l store.AgentLimiter, name string, n int, r float64) error {
			return l.SetAgentLimit(ctx, store.AgentLimit{Agent: name, MaxRunning: n, StartsPerMinute: r})
		},
		list: func(ctx context.Context, l store.AgentLimiter) ([]limitJSON, error) {
			ls, err := l.AgentLimits(ctx)
			out := make([]limitJSON, len(ls))
			for i, x := range ls {
				out[i] = limitJSON{Agent: x.Agent, MaxRunning: x.MaxRunning, StartsPerMinute: x.StartsPerMinute}
			}
			return out, err
		},
	})
}

// limitCommand is tenant-limit or agent-limit: what it limits (name), and
// how it sets and lists the store's limits.
type limitCommand[L any] struct {
	name, usage string
	set         func(ctx context.Context, l L, name string, maxRunning int, startsPerMinute float64) error
	list        func(ctx context.Context, l L) ([]limitJSON, error)
}

func runLimit[L any](ctx context.Context, args []string, stdout io.Writer, c limitCommand[L]) error {
	cmd := c.name + "-limit"
	fs := newFlags(cmd, c.usage, stdout)
	db := dbFlag(fs)
	name := fs.String(c.name, "", c.name+" whose runs are limited")
	maxRunning := fs.Int("max-running", -1, "the most runs in a step at once; 0 removes the cap")
	starts := fs.Float64("starts-per-minute", -1, "the most runs started a minute; 0 removes the rate")
	asJSON := jsonFlag(fs, "the limits, one object a "+c.name)
	if err := fs.parseNone(args); err != nil {
		return err
	}
	given := *maxRunning >= 0 || *starts >= 0
	if (*name == "") == given {
		return usageError{fmt.Sprintf("%s: give --%s with --max-running or --starts-per-minute (or both), or none of them to list the limits (%s)",
			cmd, c.name, fs.usageLine())}
	}
	open := db.openReadOnly
	if given {
		open = db.openExisting
	}
	st, err := open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	l, ok := st.(L)
	if !ok {
		return fmt.Errorf("%s: this store keeps no %s limits", cmd, c.name)
	}
	if given {
		// A flag not given keeps the value the store holds.
		cur, err := c.list(ctx, l)
		if err != nil {
			return err
		}
		n, r := *maxRunning, *starts
		for _, x := range cur {
			if x.Tenant+x.Agent == *name {
				n, r = keep(n, x.MaxRunning), keep(r, x.StartsPerMinute)
			}
		}
		if err := c.set(ctx, l, *name, max(n, 0), max(r, 0)); err != nil {
			return err
		}
	}
	limits, err := c.list(ctx, l)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSONLines(stdout, limits)
	}
	if len(limits) == 0 {
		fmt.Fprintf(stdout, "no %s has a limit\n", c.name)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\tMAX RUNNING\tSTARTS/MIN\n", map[string]string{"tenant": "TENANT", "agent": "AGENT"}[c.name])
	for _, x := range limits {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", x.Tenant+x.Agent, orNone(x.MaxRunning > 0, fmt.Sprint(x.MaxRunning)),
			orNone(x.StartsPerMinute > 0, fmt.Sprint(x.StartsPerMinute)))
	}
	return tw.Flush()
}

// keep is the value given, or the one held when none was given (-1).
func keep[N int | float64](given, held N) N {
	if given < 0 {
		return held
	}
	return given
}

func orNone(ok bool, s string) string {
	if ok {
		return s
	}
	return "-"
}
