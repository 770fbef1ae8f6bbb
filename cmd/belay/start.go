package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/config"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

const startUsage = `usage: belay start --input TEXT [--user U] [--request-id ID] [--tenant T] [--agent NAME] [--config FILE] [--db PATH]
                   [--concurrency-key K [--concurrency-limit N]] [--priority P]

Queues a run for belay serve to execute. With --request-id the request is
idempotent: the same (tenant, user, request id) and input name the same run;
another input under a used request id is refused.
The run belongs to --tenant T, and only T's API keys see it in the console
and the API. Without --tenant it is tenant default, which start refuses to
guess when API keys belong to other tenants: name the tenant then.
With --concurrency-key K at most N (default 1) runs of the tenant with key K
are in a step at once, across every worker; the others wait queued.
--priority orders the tenant's due runs, higher first.`

// runStart queues a run for a worker (belay serve) to execute. Asking again
// with the same --request-id returns the same run.
func runStart(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("start", startUsage, stdout)
	db := dbFlag(fs)
	configPath := fs.String("config", "", "the agents file belay serve runs (default: the support desk)")
	agentName := fs.String("agent", support.AgentName, "agent to run")
	tenant := fs.String("tenant", "", "tenant of the run, whose approvers see it (default: default, unless API keys belong to another tenant: then it is required)")
	user := fs.String("user", "", "user the run acts for")
	requestID := fs.String("request-id", "", "client request id: one run per (tenant, user, request id)")
	input := fs.String("input", "", "the user's message")
	concurrencyKey := fs.String("concurrency-key", "", "what the run acts on (a customer, an order): runs of one key take turns")
	concurrencyLimit := fs.Int("concurrency-limit", 0, "how many runs of --concurrency-key may run at once (default 1)")
	priority := fs.Int("priority", 0, "higher goes first among the tenant's due runs")
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
	runTenant, err := startTenant(ctx, st, *tenant, stderr)
	if err != nil {
		return err
	}
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
	run, created, err := rt.StartRun(ctx, belay.RunRequest{Agent: *agentName, Tenant: runTenant, User: *user,
		ClientRequestID: *requestID, Input: *input,
		ConcurrencyKey: *concurrencyKey, ConcurrencyLimit: *concurrencyLimit, Priority: *priority})
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
		fmt.Fprintf(stdout, "run %s of tenant %s already exists for this request (%s)\n", run.ID, run.Tenant, run.Status)
		return nil
	}
	fmt.Fprintf(stdout, "run %s queued for tenant %s: belay serve executes it (follow it with: belay trace %s %s)\n", run.ID, run.Tenant, run.ID, db)
	return nil
}

// startTenant is the tenant a run is started in: the one given, else
// "default". A run is seen in the console and the API only by keys of its
// tenant, so when API keys belong to tenants other than default, the tenant
// must be named: defaulting would start a run their approvers never see,
// and guessing one (the only tenant with keys) would change meaning when
// another tenant gets a key, and a retried request would start a second run.
// A tenant given that no key belongs to is said on stderr.
func startTenant(ctx context.Context, st store.Store, tenant string, stderr io.Writer) (string, error) {
	as, ok := st.(store.AccessStore)
	if !ok {
		return cmp.Or(tenant, "default"), nil
	}
	keys, err := as.APIKeys(ctx, "")
	if err != nil {
		return "", fmt.Errorf("start: list API keys: %w", err)
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if k.RevokedAt.IsZero() {
			seen[k.Tenant] = true
		}
	}
	tenants := slices.Sorted(maps.Keys(seen))
	switch {
	case tenant != "":
		if len(tenants) > 0 && !seen[tenant] {
			fmt.Fprintf(stderr, "belay start: no API key belongs to tenant %s, so the run shows in no console (keys belong to %s)\n", tenant, strings.Join(tenants, ", "))
		}
		return tenant, nil
	case len(tenants) == 0 || (len(tenants) == 1 && seen["default"]):
		return "default", nil
	}
	return "", usageError{fmt.Sprintf("start: say which tenant the run is for: --tenant %s. The store has API keys of %s, and a run of tenant default (what start uses without --tenant) shows only to keys of tenant default",
		tenants[0], strings.Join(tenants, ", "))}
}

// startJSON is what start --json prints: the run, as belay runs --json
// prints it, and whether this request created it.
type startJSON struct {
	runJSON
	Created bool `json:"created"`
}
