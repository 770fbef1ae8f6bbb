// Command belay runs Belay's demo, workers and operator tools.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	code := exitCode(err)
	if code != 0 {
		fmt.Fprintln(os.Stderr, "belay:", err)
	}
	os.Exit(code)
}

// exitCode is the exit status for run's error: 0 for none and for a request
// for help (the usage was printed), 2 for a mistake in how belay was
// invoked, 1 for any other failure.
func exitCode(err error) int {
	var ue usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		return 2
	}
	return 1
}

// usageError is a mistake in how belay was invoked.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// command is one subcommand: a name, a line of help and the function that
// runs it with its own arguments.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	hidden  bool
}

func commands() []command {
	return []command{
		{name: "demo", summary: "run the support-desk scenario, with a crash and a resume", run: runDemo},
		{name: "serve", summary: "run workers, the HTTP API and the approval console (the support agent, or --config FILE)", run: runServe},
		{name: "keys", summary: "API keys for the server: belay keys create --tenant T --role approver", run: runKeys},
		{name: "webhooks", summary: "webhook endpoints for notifications: belay webhooks add URL --tenant T", run: runWebhooks},
		{name: "schedules", summary: "start runs on a cron spec: belay schedules add NAME --agent A --cron SPEC --input TEXT", run: runSchedules},
		{name: "start", summary: "queue a run for belay serve (idempotent with --request-id)", run: runStart},
		{name: "runs", summary: "list runs with status, steps and cost", run: runRuns},
		{name: "show", summary: "show one run: status, messages, side effects, cost (--json: the checkpoint)", run: runShow},
		{name: "trace", summary: "print a run's trace as JSONL", run: runTrace},
		{name: "approvals", summary: "list approvals waiting for a person (or decided ones)", run: runApprovals},
		{name: "approve", summary: "approve a pending approval, or approve it edited (--edit JSON)", run: runApprove},
		{name: "reject", summary: "reject a pending approval with a reason (--note)", run: runReject},
		{name: "audit", summary: "list irreversible side effects a policy approved rather than a person, with their runs", run: runAudit},
		{name: "stats", summary: "approval statistics per category: belay stats approvals", run: runStats},
		{name: "say", summary: "reply to a run that asked its user a question (status waiting_input)", run: runSay},
		{name: "signal", summary: "send a named event to a run, which waits for it or keeps it", run: runSignal},
		{name: "answer", summary: "answer a run's question to a person, or post a deferred tool's result", run: runAnswer},
		{name: "resume", summary: "continue a paused run, raising the limit it hit (--add-usd, --add-turns)", run: runResume},
		{name: "migrate", summary: "move a run paused on version_mismatch to a new agent version (--to-version)", run: runMigrate},
		{name: "fork", summary: "make a new run from a run's history up to a step (--at-step), repeating none of its side effects", run: runFork},
		{name: "replay", summary: "replay recorded runs on another model or version in a sandbox and compare their side effects", run: runReplay},
		{name: "resolve", summary: "answer an unknown outcome: the side effect happened (--applied) or not", run: runResolve},
		{name: "killswitch", summary: "stop or restart model calls for a tenant or everyone", run: runKillSwitch},
		{name: "tenant-limit", summary: "cap a tenant's runs in a step at once and their start rate, across workers (or list the limits)", run: runTenantLimit},
		{name: "agent-limit", summary: "cap an agent's runs in a step at once and their start rate, across workers (or list the limits)", run: runAgentLimit},
		{name: "spend-cap", summary: "cap what a tenant's runs spend on models in a day or a month, across workers (or list the caps)", run: runSpendCap},
		{name: "prune", summary: "delete runs that ended longer ago than --older-than, with all they own", run: runPrune},
		{name: "backup", summary: "write a consistent copy of the SQLite database while workers go on", run: runBackup},
		{name: "check", summary: "run SQLite's integrity check over the database file; exit status 1 if it is damaged", run: runCheck},
		{name: "bench", summary: "measure durable steps per second and per-step overhead", run: runBench},
		{name: "policy", summary: "policy tools: simulate a policy file against traffic", run: runPolicy},
		{name: "version", summary: "print the version, commit, Go version and store schema of this binary", run: runVersion},
		{name: "worker", summary: "execute due runs of the support agent (used by demo)", run: runWorker, hidden: true},
		{name: "bench-worker", summary: "execute due runs of bench's agents (used by bench)", run: runBenchWorker, hidden: true},
		{name: "bench-server", summary: "serve bench's agents with the HTTP API (used by bench --streams)", run: runBenchServer, hidden: true},
		{name: "probe", summary: "ask a belay serve whether it is ready (health checks in images without a shell)", run: runProbe, hidden: true},
	}
}

// run runs the command args name. Its error decides the exit status
// (exitCode); main alone exits.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || isHelp(args[0]) {
		if len(args) == 2 && args[0] == "help" {
			// belay help COMMAND is belay COMMAND -h.
			return run(ctx, []string{args[1], "-h"}, stdout, stderr)
		}
		usage(stdout)
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	usage(stderr)
	return usageError{fmt.Sprintf("unknown command %q", args[0])}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "belay: a durable runtime for AI agents")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "usage: belay COMMAND [flags]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		if !c.hidden {
			fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands that open a store take --db PATH (default ./belay.db, or $BELAY_DB),")
	fmt.Fprintln(w, "or --database-url URL for PostgreSQL (or $BELAY_DATABASE_URL).")
	fmt.Fprintln(w, "belay COMMAND -h (or belay help COMMAND) shows a command's usage and flags.")
}
