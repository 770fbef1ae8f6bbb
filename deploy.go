package belay

import (
	"context"
	"errors"
	"fmt"

	"github.com/belayrun/belay/store"
)

// A deploy without stopping work: a version that declares the versions it
// continues (Agent.Continues) takes their runs as it meets them, and the
// runs of a version it does not continue, paused with version_mismatch,
// are moved in bulk by MigrateAll.

// ContinuesDecider is the decider recorded on the migrated event of a run a
// worker moved to its version because the version continues the run's.
const ContinuesDecider = "agent:continues"

// continueVersion moves the run this worker holds to the worker's version,
// which declares that it continues the run's, with a migrated event. A
// store that cannot move it leaves the run to pause as any other mismatch.
func (x *execution) continueVersion(ctx context.Context) error {
	d, ok := x.r.store.(store.Deployer)
	if !ok {
		return nil
	}
	from, now := x.run.AgentVersion, x.r.cfg.now()
	events := []store.Event{event(x.run.Step, now, store.EventMigrated, store.MigratedData{
		By: ContinuesDecider, Agent: x.agent.Name, From: from, To: x.agent.Version, Tools: x.agent.toolPrint})}
	if err := d.MoveVersion(ctx, store.MoveVersionParams{Fence: x.fence(), Now: now, From: from, To: x.agent.Version, Events: events}); err != nil {
		return err
	}
	x.run.AgentVersion = x.agent.Version
	x.observe(events)
	return nil
}

// sameTools reports whether the agent continues runs of other versions
// with the same tools (Agent.ContinuesSameTools) and the run's version has
// them: the tools fingerprint its trace recorded last, when the run
// started or last moved version, is the worker's.
func (x *execution) sameTools(ctx context.Context) (bool, error) {
	if !x.agent.ContinuesSameTools {
		return false, nil
	}
	events, err := x.r.store.Events(ctx, x.run.ID)
	if err != nil {
		return false, fmt.Errorf("read the run's tools fingerprint: %w", err)
	}
	recorded, err := recordedTools(events)
	if err != nil {
		return false, err
	}
	return recorded != "" && recorded == x.agent.toolPrint, nil
}

// recordedTools is the tools fingerprint a run's trace recorded last: when
// it was created, or when it last moved version. Empty when unknown.
func recordedTools(events []store.Event) (string, error) {
	recorded := ""
	for _, ev := range events {
		switch ev.Type {
		case store.EventRunCreated:
			d, err := store.DecodeEvent[store.RunCreatedData](ev)
			if err != nil {
				return "", err
			}
			recorded = d.Tools
		case store.EventMigrated:
			d, err := store.DecodeEvent[store.MigratedData](ev)
			if err != nil {
				return "", err
			}
			recorded = d.Tools
		}
	}
	return recorded, nil
}

// MigrateAllOptions selects the runs MigrateAll moves.
type MigrateAllOptions struct {
	// Tenant keeps to one tenant; AnyTenant moves every tenant's.
	Tenant string
	// Agent keeps to one agent's runs; empty moves every agent's.
	Agent string
	// From is the version the runs are on, To the one they move to. Both
	// required.
	From, To string
	// Batch is how many runs are read and moved at a time. Default 100.
	Batch int
	// By names who decided, recorded on each run's migrated event.
	By string
	// Check, if set, is asked about each run before it moves: a run it
	// refuses stays paused, counted in Refused. belay migrate
	// --if-replay-passes checks that a replay on the new version verifies
	// with the recording's side effects (ReplayPasses).
	Check func(ctx context.Context, run store.Run) (bool, error)
}

// MigrateAllResult is what MigrateAll moved.
type MigrateAllResult struct {
	// Moved are the ids of the runs moved and queued, in the order moved.
	Moved []string
	// Batches is how many batches were read.
	Batches int
	// Refused are the ids of the runs Check kept where they were.
	Refused []string
}

// MigrateAll moves every run paused on version_mismatch at version o.From
// to o.To and queues it, in batches of o.Batch: each run as Migrate moves
// one, in a transaction of its own with its migrated event. A run that
// changed meanwhile (resumed, migrated by someone else) is left as it is.
// It returns what it moved so far with the error that stopped it.
func (op *Operator) MigrateAll(ctx context.Context, o MigrateAllOptions) (MigrateAllResult, error) {
	var res MigrateAllResult
	if o.From == "" || o.To == "" {
		return res, errors.New("migrate all: both the version to move from and the version to move to are required")
	}
	if o.From == o.To {
		return res, fmt.Errorf("migrate all: runs on %s are on that version already; resume them to continue there", o.From)
	}
	if o.Batch <= 0 {
		o.Batch = 100
	}
	after := ""
	for {
		runs, err := op.store.ListRuns(ctx, store.ListRunsParams{Tenant: o.Tenant, Agent: o.Agent, Status: store.StatusPaused,
			After: after, Limit: o.Batch})
		if err != nil {
			return res, fmt.Errorf("migrate all: %w", err)
		}
		if len(runs) == 0 {
			break
		}
		res.Batches++
		for _, run := range runs {
			if run.AgentVersion != o.From || run.StopReason != "version_mismatch" {
				continue
			}
			if o.Check != nil {
				ok, err := o.Check(ctx, run)
				if err != nil {
					return res, fmt.Errorf("migrate all: check run %s: %w", run.ID, err)
				}
				if !ok {
					res.Refused = append(res.Refused, run.ID)
					continue
				}
			}
			if _, err := op.migrate(ctx, run, o.To, o.By); err != nil {
				if errors.Is(err, store.ErrWrongStatus) {
					continue
				}
				return res, err
			}
			res.Moved = append(res.Moved, run.ID)
		}
		after = runs[len(runs)-1].ID
		if len(runs) < o.Batch {
			break
		}
	}
	if len(res.Moved) > 0 {
		op.done()
	}
	return res, nil
}

// ReplayPasses reports whether a replay makes every side effect its
// recording made, with the same arguments: the test a run passes before it
// moves to a version it was not recorded on. A recording that had ended
// must also be matched exactly, nothing extra, and the replay verify; one
// that had not (a run paused on the mismatch) has the rest of its work
// ahead, which its replay does beyond it, and the world it is verified
// against lacks that work yet.
func ReplayPasses(r ReplayResult, recordingEnded bool) bool {
	if r.Missing != 0 || r.DifferentArgs != 0 {
		return false
	}
	return !recordingEnded || (r.Extra == 0 && r.Verified)
}
