package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/store"
)

// runMigrate moves a run paused on a version mismatch to the agent version
// the workers now run and queues it: the explicit migration without which a
// run is never resumed into another version. The CLI holds no agents, so the
// operator names the version; the worker that paused the run named it in the
// stop detail.
const migrateUsage = `usage: belay migrate RUN --to-version V [--tenant T] [--as NAME] [--db PATH | --database-url URL]

Moves a run paused on version_mismatch (a deploy changed its agent's instructions, tools or
model) to version V and queues it: it continues from its checkpoint under the new agent.
V is the version the workers now run, named in the run's stop detail (belay show RUN).
The move is recorded in the trace as a migrated event, with both versions and who decided.`

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("migrate", migrateUsage, stdout)
	db := dbFlag(fs)
	to := fs.String("to-version", "", "the agent version the workers now run (required; belay show RUN names it)")
	tenant := fs.String("tenant", "", "the run's tenant (default: any)")
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
	run, err := st.GetRun(ctx, *tenant, runID)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("run %s not found in %s (list runs with: belay runs %s)", runID, db.Name(), db)
	}
	if err != nil {
		return fmt.Errorf("read run %s: %w", runID, err)
	}
	if *to == "" {
		msg := "migrate: which version? --to-version names the agent version the workers now run"
		if run.StopReason == "version_mismatch" {
			msg += "; the run stopped with: " + run.StopDetail
		}
		return usageError{msg}
	}
	migrated, err := belay.NewOperator(st).Migrate(ctx, *tenant, runID, *to, decider(*as))
	if errors.Is(err, store.ErrWrongStatus) {
		return fmt.Errorf("%w; only a run paused on version_mismatch is migrated (see its status with: belay show %s %s)", err, runID, db)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(stdout, struct {
			runJSON
			FromVersion string `json:"from_version"`
		}{runSummary(migrated), run.AgentVersion})
	}
	fmt.Fprintf(stdout, "run %s moved from %s version %s to %s and is %s: the next worker on %s that runs %s continues it\n",
		migrated.ID, migrated.Agent, run.AgentVersion, migrated.AgentVersion, migrated.Status, db.Name(), migrated.AgentVersion)
	return nil
}
