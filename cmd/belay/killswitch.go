package main

import (
	"context"
	"fmt"
	"io"

	"github.com/belayrun/belay"
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
	st, err := db.openExisting(ctx)
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
		if err := belay.SetKillSwitch(ctx, st, *tenant, true, reason); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "kill switch engaged for %s: running runs pause at their next step, new runs wait\n", scope)
	case "off":
		if err := belay.SetKillSwitch(ctx, st, *tenant, false, reason); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "kill switch released for %s: the runs it paused are queued again\n", scope)
	case "status":
		on, why, err := st.KillSwitch(ctx, *tenant)
		if err != nil {
			return err
		}
		if on {
			fmt.Fprintf(stdout, "engaged for %s: %s\n", scope, why)
		} else {
			fmt.Fprintf(stdout, "released for %s\n", scope)
		}
	}
	return nil
}
