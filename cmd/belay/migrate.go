package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
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
	ifReplay := fs.Bool("if-replay-passes", false, "with --all: move only the support runs whose replay on this binary's support agent, as version --to, makes the side effects their recording made (belay replay)")
	worldPath := fs.String("world", "", "with --if-replay-passes: the support world's database, read by the requirements (default: DB + .world)")
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
		o := belay.MigrateAllOptions{Tenant: *tenant, Agent: *agent, From: *from, To: *to, Batch: *batch, By: decider(*as)}
		replayWorld := "" // no replay
		if *ifReplay {
			replayWorld = cmp.Or(*worldPath, "-")
		}
		return migrateAll(ctx, db, o, replayWorld, *asJSON, stdout)
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
// replayWorld, if not empty, asks for --if-replay-passes with the world at
// that path ("-": the default one).
func migrateAll(ctx context.Context, db *storeTarget, o belay.MigrateAllOptions, replayWorld string, asJSON bool, stdout io.Writer) error {
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
	if replayWorld != "" {
		if replayWorld == "-" {
			replayWorld = ""
		}
		check, done, err := replayCheck(ctx, st, db, replayWorld, o.To)
		if err != nil {
			return err
		}
		defer done()
		o.Check = check
	}
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
			Refused     []string `json:"refused"`
		}{o.From, o.To, len(res.Moved), res.Batches, moved, append([]string{}, res.Refused...)})
	}
	fmt.Fprintf(stdout, "%d runs moved from version %s to %s and queued, in %d batches of up to %d: the next workers on %s that run %s continue them\n",
		len(res.Moved), o.From, o.To, res.Batches, o.Batch, db.Name(), o.To)
	if len(res.Refused) > 0 {
		fmt.Fprintf(stdout, "%d runs stay paused: their replay on %s does not make the side effects their recording made (belay replay --runs %s)\n",
			len(res.Refused), o.To, strings.Join(res.Refused, ","))
	}
	return nil
}

// replayCheck is the check of --if-replay-passes: a run moves only if its
// replay on this binary's support agent, as version to, in a sandbox,
// passes (belay.ReplayPasses). done removes the sandbox.
func replayCheck(ctx context.Context, src store.Store, db *storeTarget, worldPath, to string) (check func(context.Context, store.Run) (bool, error), done func(), err error) {
	world, agent, err := openSupport(ctx, "migrate", db, worldPath, "")
	if err != nil {
		return nil, nil, err
	}
	agent.Version = to
	dir, err := os.MkdirTemp("", "belay-migrate-replay-")
	if err != nil {
		world.Close()
		return nil, nil, err
	}
	sandbox, err := sqlite.Open(ctx, filepath.Join(dir, "sandbox.db"), sqlite.Config{})
	if err != nil {
		world.Close()
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("migrate: open the replay sandbox: %w", err)
	}
	done = func() {
		sandbox.Close()
		world.Close()
		os.RemoveAll(dir)
	}
	check = func(ctx context.Context, run store.Run) (bool, error) {
		if run.Agent != support.AgentName {
			return false, nil
		}
		res, err := belay.Replay(ctx, src, []store.Run{run}, belay.ReplayOptions{Agent: agent, Sandbox: sandbox})
		if err != nil {
			return false, err
		}
		return belay.ReplayPasses(res[0], run.Status.Terminal()), nil
	}
	return check, done, nil
}
