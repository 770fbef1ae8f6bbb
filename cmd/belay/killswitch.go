package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

const killSwitchUsage = `usage: belay killswitch on --reason TEXT [--tenant T] [--db PATH]
       belay killswitch off [--tenant T] [--db PATH]
       belay killswitch status [--tenant T] [--db PATH]

Stops model calls for tenant T, or for every tenant without --tenant: running
runs pause at their next step and new runs wait. Releasing queues the runs it
paused again. belay killswitch VERB -h shows a verb's flags.`

var killSwitchVerbUsage = map[string]string{
	"on": `usage: belay killswitch on --reason TEXT [--tenant T] [--db PATH]

Engages the kill switch of tenant T, or the global one without --tenant:
running runs pause at their next step, new runs wait.`,
	"off": `usage: belay killswitch off [--tenant T] [--db PATH]

Releases the kill switch of tenant T, or the global one without --tenant; the
runs it paused are queued again.`,
	"status": `usage: belay killswitch status [--tenant T] [--db PATH]

Says whether the kill switch holds tenant T's runs, or without --tenant the
global switch and each tenant's.`,
}

// runKillSwitch engages or releases the kill switch of a tenant, or the
// global one.
func runKillSwitch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	verb, rest, err := splitVerb("killswitch", killSwitchUsage, []string{"on", "off", "status"}, args, stdout)
	if err != nil {
		return err
	}
	fs := newFlags("killswitch "+verb, killSwitchVerbUsage[verb], stdout)
	db := dbFlag(fs)
	tenant := fs.String("tenant", "", "tenant whose model calls stop (default: every tenant)")
	asJSON := jsonFlag(fs, "the switches' state (after the change, for on and off), one object")
	var reason string
	if verb != "status" {
		fs.StringVar(&reason, "reason", "", "why; on, shown in the escalation packets of the runs it pauses (required)")
	}
	pos, err := fs.parse(rest)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		// "killswitch on acme" would otherwise engage every tenant's.
		return usageError{fmt.Sprintf("killswitch %s: unexpected %q (name a tenant with --tenant); %s", verb, pos[0], fs.usageLine())}
	}
	open := db.openExisting
	if verb == "status" {
		open = db.openReadOnly
	}
	st, err := open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	scope := "every tenant"
	if *tenant != "" {
		scope = "tenant " + *tenant
	}
	switch verb {
	case "on":
		if reason == "" {
			return usageError{"killswitch on needs --reason: it is what the people who get the paused runs read"}
		}
		if err := belay.NewOperator(st).SetKillSwitch(ctx, *tenant, true, reason); err != nil {
			return err
		}
		if *asJSON {
			return killSwitchStatus(ctx, st, *tenant, true, stdout)
		}
		fmt.Fprintf(stdout, "kill switch engaged for %s: running runs pause at their next step, new runs wait\n", scope)
	case "off":
		if err := belay.NewOperator(st).SetKillSwitch(ctx, *tenant, false, reason); err != nil {
			return err
		}
		if *asJSON {
			return killSwitchStatus(ctx, st, *tenant, true, stdout)
		}
		fmt.Fprintf(stdout, "kill switch released for %s: the runs it paused are queued again\n", scope)
	case "status":
		return killSwitchStatus(ctx, st, *tenant, *asJSON, stdout)
	}
	return nil
}

// switchState says whether the kill switch holds a tenant's runs.
type switchState struct {
	Tenant  string `json:"tenant,omitempty"`
	Engaged bool   `json:"engaged"`
	// By is the switch that holds them: "tenant" (its own) or "global";
	// empty when released.
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// killSwitchJSON is what killswitch --json prints.
type killSwitchJSON struct {
	Global  switchState   `json:"global"`
	Tenants []switchState `json:"tenants"`
}

// killSwitchStatus reports the global switch and, without a tenant, each
// tenant the store knows of: those with API keys or runs not ended. A
// tenant's switch holds its runs, and so does the global one, whatever the
// tenant's says.
func killSwitchStatus(ctx context.Context, st store.Store, tenant string, asJSON bool, stdout io.Writer) error {
	global, err := switchOf(ctx, st, "")
	if err != nil {
		return err
	}
	tenants := []string{tenant}
	if tenant == "" {
		if tenants, err = knownTenants(ctx, st); err != nil {
			return err
		}
	}
	states := make([]switchState, 0, len(tenants))
	for _, t := range tenants {
		s, err := switchOf(ctx, st, t)
		if err != nil {
			return err
		}
		if s.Engaged {
			s.By = "tenant"
			// The store answers with the tenant's own reason first; the
			// global one's means the global switch holds the tenant.
			if global.Engaged && s.Reason == global.Reason {
				s.By = "global"
			}
		}
		states = append(states, s)
	}
	if global.Engaged {
		global.By = "global"
	}
	if asJSON {
		return writeJSON(stdout, killSwitchJSON{Global: global, Tenants: states})
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	if global.Engaged {
		fmt.Fprintf(tw, "global\tENGAGED: %s (it holds every tenant's runs)\n", global.Reason)
	} else {
		fmt.Fprintln(tw, "global\treleased")
	}
	for _, s := range states {
		switch {
		case s.By == "global":
			fmt.Fprintf(tw, "tenant %s\tENGAGED by the global switch\n", s.Tenant)
		case s.Engaged:
			fmt.Fprintf(tw, "tenant %s\tENGAGED: %s\n", s.Tenant, s.Reason)
		default:
			fmt.Fprintf(tw, "tenant %s\treleased\n", s.Tenant)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if tenant == "" {
		fmt.Fprintln(stdout, "(the tenants with API keys or runs not ended; belay killswitch status --tenant T asks about any other)")
	}
	return nil
}

// switchOf reads whether the tenant's runs are held ("" for the global
// switch alone).
func switchOf(ctx context.Context, st store.Store, tenant string) (switchState, error) {
	on, why, err := st.KillSwitch(ctx, tenant)
	if err != nil {
		return switchState{}, fmt.Errorf("kill switch of %q: %w", tenant, err)
	}
	return switchState{Tenant: tenant, Engaged: on, Reason: why}, nil
}

// knownTenants lists, sorted, the tenants with API keys or with runs that
// have not ended: those whose runs a kill switch holds now or will hold
// when they start. The store keeps no list of tenants; a switch engaged for
// a tenant with neither holds nothing yet.
func knownTenants(ctx context.Context, st store.Store) ([]string, error) {
	seen := map[string]bool{}
	if as, ok := st.(store.AccessStore); ok {
		keys, err := as.APIKeys(ctx, "")
		if err != nil {
			return nil, fmt.Errorf("list keys: %w", err)
		}
		for _, k := range keys {
			if k.RevokedAt.IsZero() {
				seen[k.Tenant] = true
			}
		}
	}
	for _, status := range statuses {
		if status.Terminal() {
			continue
		}
		after := ""
		for {
			page, err := st.ListRuns(ctx, store.ListRunsParams{Status: status, After: after, Limit: runsPage})
			if err != nil {
				return nil, fmt.Errorf("list runs: %w", err)
			}
			for _, r := range page {
				seen[r.Tenant] = true
			}
			if len(page) < runsPage {
				break
			}
			after = page[len(page)-1].ID
		}
	}
	return slices.Sorted(maps.Keys(seen)), nil
}
