package main

import (
	"context"
	"fmt"
	"io"

	"github.com/belayrun/belay"
)

// runKillSwitch engages or releases the kill switch of a tenant, or the
// global one.
func runKillSwitch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("killswitch", stderr)
	db := dbFlag(fs)
	tenant := fs.String("tenant", "", "tenant whose model calls stop (default: every tenant)")
	reason := fs.String("reason", "", "why, shown in the escalation packets of the runs it pauses")
	usage := "usage: belay killswitch on|off|status [--tenant T] [--reason TEXT] [--db PATH]"
	if len(args) == 0 {
		return usageError{usage}
	}
	verb := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		// "killswitch on acme" would otherwise engage every tenant's.
		return usageError{fmt.Sprintf("killswitch: unexpected %q (name a tenant with --tenant); %s", fs.Arg(0), usage)}
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
		if *reason == "" {
			return usageError{"killswitch on needs --reason: it is what the people who get the paused runs read"}
		}
		if err := belay.SetKillSwitch(ctx, st, *tenant, true, *reason); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "kill switch engaged for %s: running runs pause at their next step, new runs wait\n", scope)
	case "off":
		if err := belay.SetKillSwitch(ctx, st, *tenant, false, *reason); err != nil {
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
	default:
		return usageError{usage}
	}
	return nil
}
