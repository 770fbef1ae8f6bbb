package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/belayrun/belay"
)

const resolveUsage = `usage: belay resolve RUN KEY --applied [--result JSON] | --not-applied [--as NAME] [--db PATH]

Answers an unknown outcome of a run paused on unknown_outcome: the side effect
under KEY happened downstream (--applied, with what it returned) or did not
(--not-applied: the run calls it again under the same key).`

// runResolve answers an unknown outcome for a paused run: the side effect
// happened (with what result), or it did not.
func runResolve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("resolve", resolveUsage, stdout)
	db := dbFlag(fs)
	applied := fs.Bool("applied", false, "the side effect happened downstream (its result: --result)")
	notApplied := fs.Bool("not-applied", false, "the side effect did not happen: the run calls it again under the same key")
	result := fs.String("result", "", "with --applied, what the call returned, as JSON (default {\"ok\":true})")
	as := fs.String("as", "", "who decides, recorded in the trace (default: human:$USER)")
	asJSON := jsonFlag(fs, "the run, one object")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if len(pos) != 2 || *applied == *notApplied {
		return usageError{"resolve: name the run and the key, and say --applied or --not-applied (" + fs.usageLine() + "; belay show RUN lists the run's side effects with their keys)"}
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
	run, err := belay.NewOperator(st).ResolveOutcome(ctx, "", pos[0], o, decider(*as))
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, runSummary(run))
	}
	fmt.Fprintf(stdout, "run %s is %s: the next worker continues it\n", run.ID, run.Status)
	return nil
}
