package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// demoSummary is what `belay demo --json` prints.
type demoSummary struct {
	RunID       string         `json:"run_id"`
	Ticket      string         `json:"ticket"`
	Status      store.Status   `json:"status"`
	StopReason  string         `json:"stop_reason"`
	Steps       int            `json:"steps"`
	ModelCalls  int64          `json:"model_calls"`
	SideEffects map[string]int `json:"side_effects"`
	CostUSD     float64        `json:"cost_usd"`
	Crashes     int            `json:"crashes"`
	Resumes     int            `json:"resumes"`
	Final       string         `json:"final"`
	DB          string         `json:"db"`
	// Escalation is the packet of a run that stopped for a person.
	Escalation json.RawMessage `json:"escalation,omitempty"`
	Approvals  demoApprovals   `json:"approvals"`
}

// demoApprovals says how many approvals the demo asked for and who decided.
type demoApprovals struct {
	Count     int      `json:"count"`
	DecidedBy []string `json:"decided_by"`
}

const demoUsage = `usage: belay demo [--scenario crash|conversation|stuck|budget|unverified] [--yes] [--json] [--db PATH]

Runs the support agent on the embedded store with a scripted model. The crash
scenario (the default) asks you to approve a refund, then kills the worker
with SIGKILL once billing applied it and lost the answer; another worker takes
the run over and finds the refund by asking billing. The other scenarios show
the guards: a drifting model, a budget, a requirement the world does not meet.

The store is ./belay.db (or $BELAY_DB, or --db), where belay runs, show and
trace find it; the support world (billing, mailbox, CRM) is beside it, in
PATH.world. Each demo is a new run on a new ticket (T-1001, T-1002, ...): the
world is put back as it was before any run acted on it, and the runs of
earlier demos stay in the store.`

// The demo's runs: Ada's tickets in tenant acme, one a demo.
const (
	demoTenant = "acme"
	demoUser   = "ada"
	// demoBy cancels the runs of an earlier demo that never ended.
	demoBy = "policy:demo"
)

// runDemo runs the support-desk scenario: a worker process is killed with
// SIGKILL right after the refund lands and before Belay records it; a new
// process resumes the run, finds the refund instead of making it again, and
// finishes with the world verified.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", demoUsage, stdout)
	asJSON := jsonFlag(fs, "only the summary, one object")
	dbPath := fs.String("db", cmp.Or(os.Getenv("BELAY_DB"), "belay.db"), "path of the SQLite database, created if need be (or $BELAY_DB); the support world is PATH.world")
	yes := fs.Bool("yes", false, "approve the refund without asking, as policy:demo-auto")
	policyPath := fs.String("policy", "", "approval policy file (YAML or JSON) instead of the support desk's")
	scenario := fs.String("scenario", "crash", "crash (a worker killed mid-run), conversation (the customer answers the next day), stuck (a drifting model), budget (a dollar limit), unverified (a missing CRM note)")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	guard, ok := guardScenarios[*scenario]
	conversation := *scenario == "conversation"
	if !ok && *scenario != "crash" && !conversation {
		return usageError{fmt.Sprintf("demo: unknown scenario %q (want crash, conversation, stuck, budget or unverified)", *scenario)}
	}
	say := func(format string, a ...any) {
		if !*asJSON {
			fmt.Fprintf(stdout, format+"\n", a...)
		}
	}
	worldPath := *dbPath + ".world"

	st, err := openStore(ctx, *dbPath)
	if err != nil {
		return err
	}
	defer st.Close()
	world, err := support.OpenWorld(ctx, worldPath)
	if err != nil {
		return err
	}
	defer world.Close()
	script := support.Script()
	if ok {
		script = guard.script
	}
	agent := support.NewAgent(world, scripted.Func(script))
	if ok && guard.adjust != nil {
		guard.adjust(agent)
	}
	if conversation {
		conversationAgent(agent)
	}
	if err := usePolicyFile(agent, *policyPath); err != nil {
		return err
	}
	clock := &demoClock{}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{agent}, HumanApproval: true, Clock: clock.now})
	if err != nil {
		return err
	}
	ended, err := endEarlierDemos(ctx, rt.Operator(), st)
	if err != nil {
		return err
	}
	run, err := startDemoRun(ctx, rt, st, world)
	if err != nil {
		return err
	}
	ticket := run.ClientRequestID
	say("Belay demo: the support desk, ticket %s", ticket)
	say("  store   %s (SQLite; each step is on disk before the next one starts)", *dbPath)
	say("  world   %s (the billing system, mailbox and CRM the agent acts on, as before any run)", worldPath)
	say("  run     %s of agent support, version %s", run.ID, agent.Version)
	for _, r := range ended {
		say("  (run %s on ticket %s had not ended: canceled, since the world it acts on starts again)", r.ID, r.ClientRequestID)
	}
	say("")
	say("customer> %s", run.Input)
	say("")

	printer := &tracePrinter{store: st, runID: run.ID, w: stdout, quiet: *asJSON}
	var workerFlags []string
	if *policyPath != "" {
		workerFlags = []string{"--policy", *policyPath}
	}
	summary := demoSummary{RunID: run.ID, Ticket: ticket, DB: *dbPath}
	if ok {
		return runGuardScenario(ctx, *scenario, guard, rt, st, world, printer, summary, stdout, *asJSON)
	}
	if conversation {
		return runConversationScenario(ctx, rt, st, world, clock, printer, summary, *dbPath, workerFlags, *yes, stdout, *asJSON)
	}

	say("[worker 1] a worker process starts")
	if _, err := demoWorker(ctx, *dbPath, printer, workerFlags...); err != nil {
		return err
	}
	decided, err := decideDemoApprovals(ctx, rt, st, run.ID, *yes, stdout, *asJSON)
	if err != nil {
		return err
	}
	summary.Approvals = demoApprovals{Count: len(decided), DecidedBy: decided}

	// The payment processor will apply the refund and lose its response;
	// the worker records that the outcome is unknown and is then killed,
	// before it can find out or checkpoint anything else.
	if err := world.SetLoseRefundResponses(ctx, 1); err != nil {
		return err
	}
	// Not left armed for whatever uses this world next (belay serve on the
	// demo's database), should the demo stop before the refund.
	defer func() { _ = world.SetLoseRefundResponses(context.WithoutCancel(ctx), 0) }()
	say("")
	say("[worker 2] a second worker process starts. Billing will apply the refund and lose its answer,")
	say("           and the demo kills this worker right then, with SIGKILL")
	printer.section()
	crashed, err := demoWorker(ctx, *dbPath, printer, append(workerFlags, "--crash-at-unknown")...)
	if err != nil {
		return err
	}
	if crashed {
		summary.Crashes++
		say("")
		say("[demo] worker 2 is killed (SIGKILL): the refund is in the billing system, and Belay's ledger")
		say("       knows only that it may be")
		say("")
		summary.Resumes++
		say("[worker 3] a third worker process starts on the same store. Worker 2's process is gone, so")
		say("           worker 3 takes the run over at once, without waiting for worker 2's lease to run out")
		printer.section()
	}
	if _, err := demoWorker(ctx, *dbPath, printer, workerFlags...); err != nil {
		return err
	}
	printer.flush(ctx)

	run, err = st.GetRun(ctx, belay.AnyTenant, run.ID)
	if err != nil {
		return err
	}
	counts, err := world.Counts(ctx)
	if err != nil {
		return err
	}
	summary.Status = run.Status
	summary.StopReason = run.StopReason
	summary.Steps = run.Step
	summary.ModelCalls = run.ModelCalls
	summary.CostUSD = model.Nanodollars(run.CostNanoUSD).Dollars()
	summary.Final = run.Final
	summary.SideEffects = map[string]int{"refunds": counts.Refunds, "emails": counts.Emails, "notes": counts.Notes}

	// The demo holds only if the run is done with one refund after a
	// worker really died with the refund's outcome unknown and another
	// resumed it.
	held := func() error {
		switch {
		case run.Status != store.StatusDone:
			return fmt.Errorf("demo run ended %s (%s), not done", run.Status, run.StopReason)
		case summary.Crashes != 1 || summary.Resumes != 1:
			return fmt.Errorf("demo run ended done, but no worker was killed at the unknown outcome (crashes %d, resumes %d): the crash was not shown", summary.Crashes, summary.Resumes)
		case counts.Refunds != 1:
			return fmt.Errorf("demo run ended with %d refunds, want 1", counts.Refunds)
		}
		return nil
	}
	if *asJSON {
		if err := writeJSON(stdout, summary); err != nil {
			return err
		}
		return held()
	}
	say("")
	say("assistant> %s", run.Final)
	say("")
	say("summary")
	say("  status        %s", statusWords(run))
	say("  work          %d steps, %d model calls, cost $%.6f", run.Step, run.ModelCalls, summary.CostUSD)
	say("  crashes       %d worker killed, %d run taken over by another", summary.Crashes, summary.Resumes)
	say("  approvals     %d, decided by %s", summary.Approvals.Count, strings.Join(summary.Approvals.DecidedBy, ", "))
	say("  side effects  %d refund, %d email, %d CRM note", counts.Refunds, counts.Emails, counts.Notes)
	if counts.Refunds == 1 && summary.Crashes == 1 {
		say("  the refund's answer was lost and its worker killed; billing was asked, not charged again: one refund")
	}
	say("")
	lookCloser(stdout, *asJSON, run.ID, *dbPath, "")
	return held()
}

// lookCloser says how to read what the demo made, and how to play it again.
func lookCloser(w io.Writer, quiet bool, runID, db, scenario string) {
	if quiet {
		return
	}
	// Without --db the commands read $BELAY_DB, or belay.db unless
	// $BELAY_DATABASE_URL names another store.
	flag := ""
	if db != cmp.Or(os.Getenv("BELAY_DB"), "belay.db") || os.Getenv("BELAY_DATABASE_URL") != "" {
		flag = " --db " + db
	}
	lines := [][3]string{
		{"look closer:", "go run ./cmd/belay show " + runID + flag, "the run, its messages and side effects"},
		{"", "go run ./cmd/belay trace " + runID + flag, "every event, as JSON lines"},
		{"", "go run ./cmd/belay runs" + flag, "this run and those of earlier demos"},
		{"again:", "go run ./cmd/belay demo" + scenario + flag, "a new ticket, the world as it was"},
	}
	width := 0
	for _, l := range lines {
		width = max(width, len(l[1]))
	}
	for _, l := range lines {
		fmt.Fprintf(w, "%-13s %-*s  # %s\n", l[0], width, l[1], l[2])
	}
}

// endEarlierDemos cancels the runs of earlier demos that never ended (a
// demo stopped at its approval, a worker killed for good): the world they
// act on starts again, and a worker of this demo would otherwise pick them
// up too.
func endEarlierDemos(ctx context.Context, op *belay.Operator, st store.Store) ([]store.Run, error) {
	runs, err := demoRuns(ctx, st)
	if err != nil {
		return nil, err
	}
	var ended []store.Run
	for _, r := range runs {
		switch r.Status {
		case store.StatusDone, store.StatusFailed, store.StatusEscalated, store.StatusCanceled:
			continue
		}
		if _, err := op.Cancel(ctx, r.Tenant, r.ID, demoBy, "a new demo started its world again"); err != nil {
			return nil, fmt.Errorf("cancel run %s of an earlier demo: %w", r.ID, err)
		}
		ended = append(ended, r)
	}
	return ended, nil
}

// demoRuns are the runs of earlier demos in the store: Ada's runs of the
// support agent in tenant acme, each on a ticket.
func demoRuns(ctx context.Context, st store.Store) ([]store.Run, error) {
	runs, err := st.ListRuns(ctx, store.ListRunsParams{Tenant: demoTenant, Agent: support.AgentName, User: demoUser})
	if err != nil {
		return nil, fmt.Errorf("list the runs of earlier demos: %w", err)
	}
	return slices.DeleteFunc(runs, func(r store.Run) bool { return ticketNumber(r.ClientRequestID) == 0 }), nil
}

// ticketNumber is N of a ticket id T-N, or 0 for anything else.
func ticketNumber(id string) int {
	digits, ok := strings.CutPrefix(id, "T-")
	if !ok {
		return 0
	}
	n, err := strconv.Atoi(digits)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// startDemoRun starts the demo's run on the next ticket (T-1001 in a new
// store, then one past the highest ticket of earlier demos), with the world
// put back as it was before any run, the new ticket opened in it.
func startDemoRun(ctx context.Context, rt *belay.Runtime, st store.Store, world *support.World) (store.Run, error) {
	runs, err := demoRuns(ctx, st)
	if err != nil {
		return store.Run{}, err
	}
	next := ticketNumber(support.TicketID)
	for _, r := range runs {
		next = max(next, ticketNumber(r.ClientRequestID)+1)
	}
	// A ticket someone started by hand (belay start) is skipped: its run is
	// not the demo's.
	for range 100 {
		ticket := fmt.Sprintf("T-%d", next)
		if err := world.Restart(ctx, ticket); err != nil {
			return store.Run{}, err
		}
		run, created, err := rt.StartRun(ctx, belay.RunRequest{Agent: support.AgentName, Tenant: demoTenant, User: demoUser,
			ClientRequestID: ticket, Input: support.RequestOn(ticket)})
		if err != nil {
			return store.Run{}, err
		}
		if created {
			return run, nil
		}
		next++
	}
	return store.Run{}, errors.New("demo: no free ticket id after 100 tries; pass --db with a new file")
}

// demoWorker runs `belay worker` as a child process, printing the run's trace
// as it advances. If the child reports a crash point, it is killed with
// SIGKILL there; crashed reports whether that happened.
func demoWorker(ctx context.Context, db string, printer *tracePrinter, flags ...string) (crashed bool, err error) {
	exe, err := os.Executable()
	if err != nil {
		return false, err
	}
	args := append([]string{"worker", "--db", db}, flags...)
	cmd := exec.CommandContext(ctx, exe, args...)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	out, err := cmd.StdoutPipe()
	if err != nil {
		return false, err
	}
	if err := cmd.Start(); err != nil {
		return false, fmt.Errorf("start worker: %w", err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				printer.flush(ctx)
				if err := cmd.Wait(); err != nil {
					return false, fmt.Errorf("worker: %w: %s", err, errOut.String())
				}
				return false, nil
			}
			if strings.HasPrefix(line, crashMarker) {
				printer.flush(ctx)
				// SIGKILL on Unix; the process cannot catch it.
				if err := cmd.Process.Kill(); err != nil {
					return false, fmt.Errorf("kill worker: %w", err)
				}
				_ = cmd.Wait()
				return true, nil
			}
		case <-tick.C:
			printer.flush(ctx)
		case <-ctx.Done():
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return false, ctx.Err()
		}
	}
}
