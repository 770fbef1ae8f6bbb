package main

import (
	"context"
	"fmt"
	"io"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/config"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/model/scripted"
)

const startUsage = `usage: belay start --input TEXT [--user U] [--request-id ID] [--tenant T] [--agent NAME] [--config FILE] [--db PATH]

Queues a run for belay serve to execute. With --request-id the request is
idempotent: the same (tenant, user, request id) and input name the same run.`

// runStart queues a run for a worker (belay serve) to execute. Asking again
// with the same --request-id returns the same run.
func runStart(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("start", startUsage, stdout)
	db := dbFlag(fs)
	configPath := fs.String("config", "", "the agents file belay serve runs (default: the support desk)")
	agentName := fs.String("agent", support.AgentName, "agent to run")
	tenant := fs.String("tenant", "default", "tenant")
	user := fs.String("user", "", "user the run acts for")
	requestID := fs.String("request-id", "", "client request id: one run per (tenant, user, request id)")
	input := fs.String("input", "", "the user's message")
	asJSON := jsonFlag(fs, "the run, one object")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	if *input == "" {
		return usageError{"start: --input is required: the user's message (" + fs.usageLine() + ")"}
	}
	st, err := db.open(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	var agents []*belay.Agent
	if *configPath != "" {
		f, err := config.Load(*configPath)
		if err != nil {
			return err
		}
		var closeMCP func() error
		// The agents are built, MCP tools listed, only to know the version
		// the run is pinned to.
		agents, closeMCP, err = f.Build(ctx, buildModel)
		if err != nil {
			return err
		}
		defer closeMCP()
	} else {
		// The support agent's version does not depend on its world.
		agents = []*belay.Agent{support.NewAgent(nil, scripted.Func(support.Script()))}
	}
	rt, err := belay.New(belay.Config{Store: st, Agents: agents})
	if err != nil {
		return err
	}
	run, created, err := rt.StartRun(ctx, belay.RunRequest{Agent: *agentName, Tenant: *tenant, User: *user,
		ClientRequestID: *requestID, Input: *input})
	if err != nil {
		return err
	}
	if !created && (run.Agent != *agentName || run.Input != *input) {
		// The API answers the same 422: the request id names a run that is
		// not this request's, and returning it would pass it off as one.
		return fmt.Errorf("start: request id %q of user %q in tenant %s was used for another request (run %s, agent %s, input %q); nothing was started: give a new --request-id for a new run",
			*requestID, *user, run.Tenant, run.ID, run.Agent, oneLine(run.Input, 60))
	}
	if *asJSON {
		return writeJSON(stdout, startJSON{runSummary(run), created})
	}
	if !created {
		fmt.Fprintf(stdout, "run %s already exists for this request (%s)\n", run.ID, run.Status)
		return nil
	}
	fmt.Fprintf(stdout, "run %s queued: belay serve executes it (follow it with: belay trace %s %s)\n", run.ID, run.ID, db)
	return nil
}

// startJSON is what start --json prints: the run, as belay runs --json
// prints it, and whether this request created it.
type startJSON struct {
	runJSON
	Created bool `json:"created"`
}
