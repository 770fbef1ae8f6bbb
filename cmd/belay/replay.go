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
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/sqlite"
)

const replayUsage = `usage: belay replay --runs FILTER [--model M] [--version V] [--policy FILE] [--world PATH] [--db PATH | --database-url URL]

Replays recorded runs of the support agent in a sandbox (a temporary store, removed after) and
compares each with its recording. Reads are answered with the results the recording got for the
same arguments; side effects are never executed: one the recording's ledger holds is answered
with its recorded result, any other is counted as "would have done". Per run: verified or not,
the side effects compared (same, missing, extra, different arguments), the approvals it would
ask for, turns, tokens and cost; then the totals. Nothing reaches the world; the world is read
only by the agent's requirements.

FILTER is "all", run ids separated by commas, or filters separated by commas:
status=S, since=AGE (7d, 12h), tenant=T, limit=N (default 200).
M is scripted (the support script, default) or scripted-without-note (the script without its
internal note). V names the version the replays run as (default: the agent's own).`

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("replay", replayUsage, stdout)
	db := dbFlag(fs)
	filter := fs.String("runs", "", "which recorded runs: all, ids separated by commas, or status=S,since=AGE,tenant=T,limit=N (required)")
	modelName := fs.String("model", "scripted", "the model the runs are replayed on: scripted or scripted-without-note")
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
	var m model.Model
	switch *modelName {
	case "scripted":
		m = scripted.Func(support.Script())
	case "scripted-without-note":
		m = scripted.Func(support.ScriptWithoutNote())
	default:
		return usageError{fmt.Sprintf("replay: unknown model %q; want scripted or scripted-without-note", *modelName)}
	}
	st, err := db.openExisting(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	runs, err := replayRuns(ctx, st, *filter)
	if err != nil {
		return err
	}
	if len(runs) == 0 {
		return fmt.Errorf("replay: no recorded run of the support agent matches %q in %s (list runs with: belay runs %s)", *filter, db.Name(), db)
	}
	world, agent, err := openSupport(ctx, "replay", db, *worldPath, *policyPath)
	if err != nil {
		return err
	}
	defer world.Close()
	agent.Model = m
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

// replayRuns reads the recorded runs of the support agent a filter names.
func replayRuns(ctx context.Context, st store.Store, filter string) ([]store.Run, error) {
	p := store.ListRunsParams{Agent: support.AgentName, Limit: 200}
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
