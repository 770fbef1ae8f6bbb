package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// runResume continues a run that paused for a person, raising the limit it
// hit. A worker (belay serve, or the process that owns the agent) then
// claims it.
const resumeUsage = `usage: belay resume RUN [--add-usd D] [--add-turns N] [--add-time 10m] [--db PATH]

Continues a paused run, raising the limit it hit.`

func runResume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("resume", resumeUsage, stdout)
	db := dbFlag(fs)
	var raise belay.Raise
	fs.Float64Var(&raise.USD, "add-usd", 0, "raise the run's dollar budget by this much")
	fs.IntVar(&raise.Turns, "add-turns", 0, "allow this many more model calls")
	fs.Int64Var(&raise.InputTokens, "add-input-tokens", 0, "raise the input-token budget")
	fs.Int64Var(&raise.OutputTokens, "add-output-tokens", 0, "raise the output-token budget")
	fs.DurationVar(&raise.Time, "add-time", 0, "move the run's deadline this much later")
	as := fs.String("as", "", "who decides, recorded in the trace (default: human:$USER)")
	asJSON := jsonFlag(fs, "the run, one object")
	runID, err := fs.parseRunArg(args)
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
	run, err := belay.NewOperator(st).Resume(ctx, "", runID, raise, decider(*as))
	if errors.Is(err, store.ErrWrongStatus) {
		return fmt.Errorf("%w; only a paused run can be resumed (see its status with: belay show %s %s)", err, runID, db)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, runSummary(run))
	}
	fmt.Fprintf(stdout, "run %s is %s: the next worker on %s continues it\n", run.ID, run.Status, db.Name())
	return nil
}
