package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/config"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

const replayUsage = `usage: belay replay --runs FILTER [--config FILE] [--agent NAME] [--model M] [--version V] [--policy FILE] [--world PATH] [--db PATH | --database-url URL]

Replays recorded runs of the support agent, or of an agent of --config FILE (the agents file
belay serve runs), in a sandbox (a temporary store, removed after) and
compares each with its recording. Reads are answered with the results the recording got for the
same arguments; side effects are never executed: one the recording's ledger holds is answered
with its recorded result, any other is counted as "would have done". Per run: verified or not,
the side effects compared (same, missing, extra, different arguments), the approvals it would
ask for, turns, tokens and cost; then the totals. Nothing reaches the world; the world is read
only by the agent's requirements.

FILTER is "all", run ids separated by commas, or filters separated by commas:
status=S, since=AGE (7d, 12h), tenant=T, limit=N (default 200).
For the support agent, M is scripted (the support script, default) or scripted-without-note
(the script without its internal note). For an agent of --config FILE, M is primary (the
file's model, default) or fallback (its fallback model), and the replays call that model for
real. --agent names the agent (default: the support agent, or the file's only agent). V names
the version the replays run as (default: the agent's own).`

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("replay", replayUsage, stdout)
	db := dbFlag(fs)
	filter := fs.String("runs", "", "which recorded runs: all, ids separated by commas, or status=S,since=AGE,tenant=T,limit=N (required)")
	configPath := fs.String("config", "", "the agents file belay serve runs, whose agent is replayed (default: the support desk)")
	agentName := fs.String("agent", "", "the agent whose runs are replayed (default: the support agent, or the --config file's only agent)")
	modelName := fs.String("model", "", "the model the runs are replayed on: scripted or scripted-without-note for the support agent (default scripted), primary or fallback for an agent of --config (default primary)")
	version := fs.String("version", "", "the agent version the replays run as (default: the agent's own)")
	worldPath := fs.String("world", "", "path of the support world's database, read by the requirements (default: DB + .world)")
	policyPath := fs.String("policy", "", "approval policy file (YAML or JSON) instead of the support desk's")
	asJSON := jsonFlag(fs, "one object per replayed run")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	if *filter == "" {
		return usageError{"replay: which runs? --runs all, --runs RUN,RUN or --runs status=done,since=7d (" + fs.usageLine() + ")"}
	}
	if *configPath == "" && *agentName != "" && *agentName != support.AgentName {
		return usageError{fmt.Sprintf("replay: agent %q is not the support agent, the one this command builds by itself; pass --config FILE, the agents file belay serve runs it from", *agentName)}
	}
	var m model.Model
	if *configPath == "" {
		switch *modelName {
		case "", "scripted":
			m = scripted.Func(support.Script())
		case "scripted-without-note":
			m = scripted.Func(support.ScriptWithoutNote())
		default:
			return usageError{fmt.Sprintf("replay: unknown model %q for the support agent; want scripted or scripted-without-note", *modelName)}
		}
	} else if *modelName != "" && *modelName != "primary" && *modelName != "fallback" {
		return usageError{fmt.Sprintf("replay: unknown model %q for an agent of --config; want primary (the file's model) or fallback (its fallback model)", *modelName)}
	}
	st, err := db.openExisting(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	var agent *belay.Agent
	if *configPath != "" {
		var closeAgents func() error
		agent, closeAgents, err = configAgent(ctx, st, *configPath, *agentName, *modelName)
		if err != nil {
			return err
		}
		defer closeAgents()
		if err := usePolicyFile(agent, *policyPath); err != nil {
			return err
		}
	}
	name := support.AgentName
	if agent != nil {
		name = agent.Name
	}
	runs, err := replayRuns(ctx, st, name, *filter)
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		return fmt.Errorf("replay: no recorded run of agent %s matches %q in %s (list runs with: belay runs %s; the runs of another agent need --agent NAME, and --config FILE unless it is the support agent)",
			name, *filter, db.Name(), db)
	}
	if agent == nil {
		world, desk, err := openSupport(ctx, "replay", db, *worldPath, *policyPath)
		if err != nil {
			return err
		}
		defer world.Close()
		agent = desk
		agent.Model = m
	}
	if *version != "" {
		agent.Version = *version
	}
	dir, err := os.MkdirTemp("", "belay-replay-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sandbox, err := sqlite.Open(ctx, filepath.Join(dir, "sandbox.db"), sqlite.Config{})
	if err != nil {
		return fmt.Errorf("replay: open the sandbox: %w", err)
	}
	defer sandbox.Close()
	results, err := belay.Replay(ctx, st, runs, belay.ReplayOptions{Agent: agent, Sandbox: sandbox})
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSONLines(stdout, results)
	}
	return printReplay(stdout, results)
}

// configAgent builds the agent named name (or the only one) of the agents
// file path, on its fallback model if model says so. Its requirements that
// read a run's effects read them in st.
func configAgent(ctx context.Context, st store.Store, path, name, model string) (*belay.Agent, func() error, error) {
	f, err := config.Load(path)
	if err != nil {
		return nil, nil, err
	}
	agents, closeAgents, err := f.BuildWith(ctx, config.BuildParams{Models: buildModel, Effects: st})
	if err != nil {
		return nil, nil, err
	}
	var names []string
	var agent *belay.Agent
	for _, a := range agents {
		names = append(names, a.Name)
		if a.Name == name || name == "" && len(agents) == 1 {
			agent = a
		}
	}
	switch {
	case agent == nil && name == "":
		closeAgents()
		return nil, nil, usageError{fmt.Sprintf("replay: %s has %d agents (%s); name the one to replay with --agent", path, len(agents), strings.Join(names, ", "))}
	case agent == nil:
		closeAgents()
		return nil, nil, usageError{fmt.Sprintf("replay: %s has no agent named %q; it has %s", path, name, strings.Join(names, ", "))}
	case model == "fallback" && agent.Fallback == nil:
		closeAgents()
		return nil, nil, usageError{fmt.Sprintf("replay: agent %s of %s has no fallback model; replay it on its own (--model primary)", agent.Name, path)}
	case model == "fallback":
		agent.Model, agent.Fallback = agent.Fallback, nil
	}
	return agent, closeAgents, nil
}

// replayRuns reads the recorded runs of an agent a filter names.
func replayRuns(ctx context.Context, st store.Store, agent, filter string) ([]store.Run, error) {
	p := store.ListRunsParams{Agent: agent, Limit: 200}
	if filter != "all" {
		var ids []string
		for part := range strings.SplitSeq(filter, ",") {
			key, value, ok := strings.Cut(strings.TrimSpace(part), "=")
			if !ok {
				ids = append(ids, key)
				continue
			}
			switch key {
			case "status":
				p.Status = store.Status(value)
				if !validStatus(p.Status) {
					return nil, usageError{fmt.Sprintf("replay: --runs status=%s is no status; want one of %v", value, statuses)}
				}
			case "since":
				age, err := parseAge(value)
				if err != nil {
					return nil, usageError{"replay: --runs since=: " + err.Error()}
				}
				p.Since = time.Now().Add(-age)
			case "tenant":
				p.Tenant = value
			case "limit":
				n, err := strconv.Atoi(value)
				if err != nil || n < 1 {
					return nil, usageError{fmt.Sprintf("replay: --runs limit=%s is not a number above 0", value)}
				}
				p.Limit = n
			default:
				return nil, usageError{fmt.Sprintf("replay: --runs %s=: unknown filter; want status, since, tenant or limit", key)}
			}
		}
		if len(ids) > 0 {
			var runs []store.Run
			for _, id := range ids {
				run, err := st.GetRun(ctx, "", id)
				if err != nil {
					return nil, fmt.Errorf("replay: run %s: %w", id, err)
				}
				if run.Agent != agent {
					return nil, usageError{fmt.Sprintf("replay: run %s is a run of agent %s, not of %s; replay it with --agent %s (and --config FILE, the agents file belay serve runs it from, unless it is the support agent)",
						id, run.Agent, agent, run.Agent)}
				}
				runs = append(runs, run)
			}
			return runs, nil
		}
	}
	return st.ListRuns(ctx, p)
}

// printReplay prints a line per replayed run and the totals.
func printReplay(w io.Writer, results []belay.ReplayResult) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tREPLAY\tVERIFIED\tSAME\tMISSING\tEXTRA\tDIFFERENT ARGS\tWOULD HAVE DONE\tAPPROVALS\tTURNS\tTOKENS\tCOST USD")
	var total belay.ReplayResult
	verified := 0
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.6f\n", r.RunID, r.Status, r.Verified, r.Same, r.Missing, r.Extra,
			r.DifferentArgs, r.WouldHaveDone, r.Approvals, r.Turns, r.InputTokens+r.OutputTokens, model.Nanodollars(r.CostNanoUSD).Dollars())
		if r.Verified {
			verified++
		}
		total.Same += r.Same
		total.Missing += r.Missing
		total.Extra += r.Extra
		total.DifferentArgs += r.DifferentArgs
		total.WouldHaveDone += r.WouldHaveDone
		total.Approvals += r.Approvals
		total.Turns += r.Turns
		total.InputTokens += r.InputTokens + r.OutputTokens
		total.CostNanoUSD += r.CostNanoUSD
	}
	fmt.Fprintf(tw, "total %d\t\t%d verified\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.6f\n", len(results), verified, total.Same, total.Missing,
		total.Extra, total.DifferentArgs, total.WouldHaveDone, total.Approvals, total.Turns, total.InputTokens,
		model.Nanodollars(total.CostNanoUSD).Dollars())
	return tw.Flush()
}
