package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// runResume continues a run that paused for a person, raising the limit it
// hit. A worker (belay serve, or the process that owns the agent) then
// claims it.
func runResume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("resume", stderr)
	db := dbFlag(fs)
	var raise belay.Raise
	fs.Float64Var(&raise.USD, "add-usd", 0, "raise the run's dollar budget by this much")
	fs.IntVar(&raise.Turns, "add-turns", 0, "allow this many more model calls")
	fs.Int64Var(&raise.InputTokens, "add-input-tokens", 0, "raise the input-token budget")
	fs.Int64Var(&raise.OutputTokens, "add-output-tokens", 0, "raise the output-token budget")
	fs.DurationVar(&raise.Time, "add-time", 0, "move the run's deadline this much later")
	as := fs.String("as", "", "who decides, recorded in the trace (default: human:$USER)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: belay resume RUN [--add-usd D] [--add-turns N] [--add-time 10m] [--db PATH]")
		fmt.Fprintln(stderr)
		fmt.Fprintln(stderr, "Continues a paused run, raising the limit it hit.")
		fmt.Fprintln(stderr)
		fs.PrintDefaults()
	}
	runID, err := parseRunArg(fs, args)
	if err != nil {
		return err
	}
	st, err := db.openExisting(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := getRun(ctx, st, db, runID); err != nil {
		return err
	}
	run, err := belay.ResumeRun(ctx, st, "", runID, raise, decider(*as))
	if errors.Is(err, store.ErrWrongStatus) {
		return fmt.Errorf("%w; only a paused run can be resumed (see its status with: belay show %s %s)", err, runID, db)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "run %s is %s: the next worker on %s continues it\n", run.ID, run.Status, db.Name())
	return nil
}

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

// decider names who acts: an explicit --as, else the operating-system user.
func decider(as string) string {
	if as != "" {
		return as
	}
	if u, err := user.Current(); err == nil {
		return "human:" + u.Username
	}
	if name := os.Getenv("USER"); name != "" {
		return "human:" + name
	}
	return "human:unknown"
}

// runResolve answers an unknown outcome for a paused run: the side effect
// happened (with what result), or it did not.
func runResolve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("resolve", stderr)
	db := dbFlag(fs)
	applied := fs.Bool("applied", false, "the side effect happened downstream (its result: --result)")
	notApplied := fs.Bool("not-applied", false, "the side effect did not happen: the run calls it again under the same key")
	result := fs.String("result", "", "with --applied, what the call returned, as JSON (default {\"ok\":true})")
	as := fs.String("as", "", "who decides, recorded in the trace (default: human:$USER)")
	usage := "usage: belay resolve RUN KEY --applied [--result JSON] | --not-applied [--as NAME] [--db PATH]"
	var pos []string
	for len(args) > 0 {
		if err := fs.Parse(args); err != nil {
			return usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) > 0 {
			pos, args = append(pos, args[0]), args[1:]
		}
	}
	if len(pos) != 2 || *applied == *notApplied {
		return usageError{usage}
	}
	if *notApplied && *result != "" {
		// A result of what did not happen would be dropped without a word.
		return usageError{"resolve: --result goes with --applied; a side effect that did not happen has none"}
	}
	st, err := db.openExisting(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	o := belay.Outcome{Key: pos[1], Applied: *applied}
	if *result != "" {
		o.Result = json.RawMessage(*result)
	}
	run, err := belay.ResolveOutcome(ctx, st, "", pos[0], o, decider(*as))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "run %s is %s: the next worker continues it\n", run.ID, run.Status)
	return nil
}
