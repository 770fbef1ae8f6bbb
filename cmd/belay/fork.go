package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

const forkUsage = `usage: belay fork RUN --at-step N [--message TEXT [--append]] [--reason WHY] [--tenant T] [--as NAME] [--db PATH | --database-url URL]

Makes a new run, queued, whose history is RUN's up to step N (0: only the customer's message),
with its usage and plan as they were at that step. --message replaces the customer's last
message in that history (with --append: adds it after the last tool results instead).
The fork never repeats what RUN did: RUN's side effects up to step N are answered from the
ledger, and a call after it equal to one RUN made waits for a person, its approval saying
"the parent did this". The lineage (parent, step, who, why) is recorded with the fork.`

func runFork(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("fork", forkUsage, stdout)
	db := dbFlag(fs)
	atStep := fs.Int("at-step", -1, "the parent's step the fork's history ends at (required; 0 to its step count, belay show RUN)")
	message := fs.String("message", "", "the customer's message in the fork, replacing the last one")
	appendMsg := fs.Bool("append", false, "add --message after the history instead of replacing the last customer message")
	reason := fs.String("reason", "", "why the fork was made, recorded in its lineage")
	tenant := fs.String("tenant", "", "the run's tenant (default: any)")
	as := fs.String("as", "", "who forks, recorded in the lineage (default: human:$USER); they may not approve the fork's actions")
	asJSON := jsonFlag(fs, "the fork, one object")
	runID, err := fs.parseRunArg(args)
	if err != nil {
		return err
	}
	if *atStep < 0 {
		return usageError{"fork: at which step? --at-step N names the parent's step the fork's history ends at (belay show RUN gives its steps)"}
	}
	if *appendMsg && *message == "" {
		return usageError{"fork: --append adds --message; give the message with --message TEXT"}
	}
	st, err := db.openExisting(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	fork, err := belay.NewOperator(st).Fork(ctx, runID, belay.ForkOptions{Tenant: *tenant, AtStep: *atStep,
		Message: *message, AppendMessage: *appendMsg, By: decider(*as), Reason: *reason})
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("run %s not found in %s (list runs with: belay runs %s)", runID, db.Name(), db)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, struct {
			runJSON
			ParentRunID string `json:"parent_run_id"`
			AtStep      int    `json:"at_step"`
		}{runSummary(fork), runID, *atStep})
	}
	fmt.Fprintf(stdout, "run %s forked from %s at step %d and queued: the next worker on %s that runs %s version %s continues it (belay show %s)\n",
		fork.ID, runID, *atStep, db.Name(), fork.Agent, fork.AgentVersion, fork.ID)
	return nil
}
