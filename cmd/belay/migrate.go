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
       belay migrate --all --from V1 --to V2 [--agent A] [--batch N] [--tenant T] [--as NAME] [--db PATH | --database-url URL]

Moves a run paused on version_mismatch (a deploy changed its agent's instructions, tools or
model) to version V and queues it: it continues from its checkpoint under the new agent.
V is the version the workers now run, named in the run's stop detail (belay show RUN).
With --all, every run paused on version_mismatch at version V1 moves to V2, N runs at a time.
Each move is recorded in the run's trace as a migrated event, with both versions and who decided.
A version that declares the versions it continues (Agent.Continues) needs none of this.`

func runMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("migrate", migrateUsage, stdout)
	db := dbFlag(fs)
	to := fs.String("to-version", "", "the agent version the workers now run (required; belay show RUN names it)")
	fs.StringVar(to, "to", "", "the same as --to-version")
	all := fs.Bool("all", false, "move every run paused on version_mismatch at --from (no RUN)")
	from := fs.String("from", "", "with --all: the version the runs are on")
	agent := fs.String("agent", "", "with --all: only this agent's runs (default: every agent's)")
	batch := fs.Int("batch", 100, "with --all: how many runs are read and moved at a time")
	tenant := fs.String("tenant", "", "the run's tenant (default: any)")
	as := fs.String("as", "", "who decides, recorded in the trace (default: human:$USER)")
	asJSON := jsonFlag(fs, "the run, one object (with --all: what was moved, one object)")
	pos, err := fs.parse(args)
	if err != nil {
		return err
	}
	if *all {
		if len(pos) > 0 {
			return usageError{fmt.Sprintf("migrate: --all moves every run at --from; give no RUN with it (got %q)", pos[0])}
		}
		return migrateAll(ctx, db, belay.MigrateAllOptions{Tenant: *tenant, Agent: *agent, From: *from, To: *to, Batch: *batch,
			By: decider(*as)}, *asJSON, stdout)
	}
	if len(pos) != 1 {
		return usageError{fmt.Sprintf("migrate: want one run id, got %d (%s; list runs with: belay runs)", len(pos), fs.usageLine())}
	}
	runID := pos[0]
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

// migrateAll moves every run paused on a version mismatch at o.From to o.To.
func migrateAll(ctx context.Context, db *storeTarget, o belay.MigrateAllOptions, asJSON bool, stdout io.Writer) error {
	if o.From == "" || o.To == "" {
		return usageError{"migrate --all: which versions? --from names the version the runs are on, --to the one the workers now run (belay show RUN names both)"}
	}
	if o.Batch < 1 {
		return usageError{"migrate --all: --batch must be at least 1"}
	}
	st, err := db.openExisting(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	res, err := belay.NewOperator(st).MigrateAll(ctx, o)
	if err != nil {
		return fmt.Errorf("%w (moved %d runs before it)", err, len(res.Moved))
	}
	if asJSON {
		moved := res.Moved
		if moved == nil {
			moved = []string{}
		}
		return writeJSON(stdout, struct {
			FromVersion string   `json:"from_version"`
			ToVersion   string   `json:"to_version"`
			Moved       int      `json:"moved"`
			Batches     int      `json:"batches"`
			Runs        []string `json:"runs"`
		}{o.From, o.To, len(res.Moved), res.Batches, moved})
	}
	fmt.Fprintf(stdout, "%d runs moved from version %s to %s and queued, in %d batches of up to %d: the next workers on %s that run %s continue them\n",
		len(res.Moved), o.From, o.To, res.Batches, o.Batch, db.Name(), o.To)
	return nil
}
