package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

const demoInput = support.DoubleChargeRequest

// demoSummary is what `belay demo --json` prints.
type demoSummary struct {
	RunID       string         `json:"run_id"`
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

const demoUsage = `usage: belay demo [--scenario crash|stuck|budget|unverified] [--yes] [--json] [--db PATH]

Runs the support agent on the embedded store with a scripted model. The crash
scenario (the default) asks you to approve a refund, then kills the worker
with SIGKILL once billing applied it and lost the answer; another worker takes
the run over and finds the refund by asking billing. The other scenarios show
the guards: a drifting model, a budget, a requirement the world does not meet.`

// runDemo runs the support-desk scenario: a worker process is killed with
// SIGKILL right after the refund lands and before Belay records it; a new
// process resumes the run, finds the refund instead of making it again, and
// finishes with the world verified.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("demo", demoUsage, stdout)
	asJSON := jsonFlag(fs, "only the summary, one object")
	dbPath := fs.String("db", "", "path of the SQLite database (default: a new one in a temporary directory)")
	yes := fs.Bool("yes", false, "approve the refund without asking, as policy:demo-auto")
	policyPath := fs.String("policy", "", "approval policy file (YAML or JSON) instead of the support desk's")
	scenario := fs.String("scenario", "crash", "crash (a worker killed mid-run), stuck (a drifting model), budget (a dollar limit), unverified (a missing CRM note)")
	if err := fs.parseNone(args); err != nil {
		return err
	}
	guard, ok := guardScenarios[*scenario]
	if !ok && *scenario != "crash" {
		return usageError{fmt.Sprintf("demo: unknown scenario %q (want crash, stuck, budget or unverified)", *scenario)}
	}
	say := func(format string, a ...any) {
		if !*asJSON {
			fmt.Fprintf(stdout, format+"\n", a...)
		}
	}
	if *dbPath == "" {
		dir, err := os.MkdirTemp("", "belay-demo-")
		if err != nil {
			return err
		}
		*dbPath = filepath.Join(dir, "belay.db")
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
	if err := world.Seed(ctx); err != nil {
		return err
	}
	script := support.Script()
	if ok {
		script = guard.script
	}
	agent := support.NewAgent(world, scripted.Func(script))
	if ok && guard.adjust != nil {
		guard.adjust(agent)
	}
	if err := usePolicyFile(agent, *policyPath); err != nil {
		return err
	}
	rt, err := belay.New(belay.Config{Store: st, Agents: []*belay.Agent{agent}, HumanApproval: true})
	if err != nil {
		return err
	}
	run, created, err := rt.StartRun(ctx, belay.RunRequest{
		Agent: "support", Tenant: "acme", User: "ada", ClientRequestID: "T-1001", Input: demoInput,
	})
	if err != nil {
		return err
	}
	if !created {
		// Asked again, the ticket's request id names the run already made
		// (that is the idempotency the demo shows): nothing would happen.
		return fmt.Errorf("%s already holds the demo's run %s (%s), and its world the refund: the demo needs a new database. Remove %s and %s (or pass --db NEW.db) and run it again; look at that run with: belay show %s --db %s",
			*dbPath, run.ID, run.Status, *dbPath, worldPath, run.ID, *dbPath)
	}
	say("Belay demo: the support desk")
	say("  store   %s (SQLite, synchronous=FULL)", *dbPath)
	say("  world   %s (billing, mailbox, CRM)", worldPath)
	say("  run     %s for ticket T-1001, agent support@%s", run.ID, agent.Version)
	say("")
	say("customer> %s", demoInput)
	say("")

	printer := &tracePrinter{store: st, runID: run.ID, w: stdout, quiet: *asJSON}
	var workerFlags []string
	if *policyPath != "" {
		workerFlags = []string{"--policy", *policyPath}
	}
	summary := demoSummary{RunID: run.ID, DB: *dbPath}
	if ok {
		return runGuardScenario(ctx, guard, rt, st, world, printer, summary, stdout, *asJSON)
	}

	say("[worker 1] starting")
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
	say("[worker 2] starting; billing will apply the refund and lose the response, and the worker will be killed right after")
	crashed, err := demoWorker(ctx, *dbPath, printer, append(workerFlags, "--crash-at-unknown")...)
	if err != nil {
		return err
	}
	if crashed {
		summary.Crashes++
		say("")
		say("[demo] SIGKILL sent to worker 2: the refund is in the billing system; Belay's ledger only knows it may be")
		say("")
		summary.Resumes++
		say("[worker 3] starting on the same store; it takes over the dead worker's lease at once")
	}
	if _, err := demoWorker(ctx, *dbPath, printer, workerFlags...); err != nil {
		return err
	}
	printer.flush(ctx)

	run, err = st.GetRun(ctx, "", run.ID)
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
	say("  status        %s (%s)", run.Status, run.StopReason)
	say("  steps         %d, model calls %d, cost $%.6f", run.Step, run.ModelCalls, summary.CostUSD)
	say("  crashes       %d, resumes %d", summary.Crashes, summary.Resumes)
	say("  approvals     %d, decided by %s", summary.Approvals.Count, strings.Join(summary.Approvals.DecidedBy, ", "))
	say("  side effects  %d refund, %d email, %d CRM note", counts.Refunds, counts.Emails, counts.Notes)
	if counts.Refunds == 1 && summary.Crashes == 1 {
		say("  the refund's response was lost and its worker killed; billing was asked, not charged again: one refund")
	}
	say("")
	say("look closer:  go run ./cmd/belay show %s --db %s", run.ID, *dbPath)
	say("              go run ./cmd/belay trace %s --db %s", run.ID, *dbPath)
	return held()
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

// tracePrinter prints a run's trace events as a readable account, each one
// once, as they appear in the store.
type tracePrinter struct {
	store store.Store
	runID string
	w     io.Writer
	quiet bool
	seen  int64
}

func (p *tracePrinter) flush(ctx context.Context) {
	events, err := p.store.Events(ctx, p.runID)
	if err != nil {
		return
	}
	for _, ev := range events {
		if ev.Seq <= p.seen {
			continue
		}
		p.seen = ev.Seq
		if line := describeEvent(ev); line != "" && !p.quiet {
			fmt.Fprintf(p.w, "  step %d  %s\n", ev.Step, line)
		}
	}
}

// describeEvent renders one trace event for a person, or "" to skip it.
func describeEvent(ev store.Event) string {
	switch ev.Type {
	case store.EventClaimed:
		d, _ := store.DecodeEvent[store.ClaimedData](ev)
		if d.Resumed {
			return fmt.Sprintf("claimed at epoch %d, resuming from the last checkpoint", d.Epoch)
		}
		return fmt.Sprintf("claimed at epoch %d", d.Epoch)
	case store.EventModelCall:
		d, _ := store.DecodeEvent[store.ModelCallData](ev)
		var calls []string
		for _, c := range d.ToolCalls {
			calls = append(calls, c.Name)
		}
		if len(calls) == 0 {
			return fmt.Sprintf("model answers (%d in / %d out tokens)", d.InputTokens, d.OutputTokens)
		}
		thought := firstLine(d.Thought)
		if thought != "" {
			thought = " - " + thought
		}
		return fmt.Sprintf("model asks for %s%s", strings.Join(calls, ", "), thought)
	case store.EventToolResult:
		d, _ := store.DecodeEvent[store.ToolResultData](ev)
		mark := "ok"
		if d.IsError {
			mark = "error"
		}
		return fmt.Sprintf("  %s -> %s: %s", d.Tool, mark, firstLine(d.Preview))
	case store.EventEffectReused:
		d, _ := store.DecodeEvent[store.EffectData](ev)
		return fmt.Sprintf("  %s already done under key %s: recorded result returned, not called again", d.Tool, d.Key)
	case store.EventEffectUnknown:
		d, _ := store.DecodeEvent[store.EffectUnknownData](ev)
		return fmt.Sprintf("  %s: outcome UNKNOWN, %s; intent %s recorded as unknown, not retried", d.Tool, cause(d.Error), d.Key)
	case store.EventReconcile:
		d, _ := store.DecodeEvent[store.ReconcileData](ev)
		if d.Found {
			return fmt.Sprintf("  %s: pending intent %s found downstream; recorded, not repeated", d.Tool, d.Key)
		}
		return fmt.Sprintf("  %s: pending intent %s not found downstream; safe to call", d.Tool, d.Key)
	case store.EventCheckpoint:
		return "checkpoint"
	case store.EventVerify:
		d, _ := store.DecodeEvent[store.VerifyData](ev)
		if d.OK {
			return fmt.Sprintf("verified: %s", d.Requirement)
		}
		return fmt.Sprintf("NOT verified: %s", d.Requirement)
	case store.EventStop:
		d, _ := store.DecodeEvent[store.StopData](ev)
		if d.Used != nil {
			var next, limit float64
			if d.NextCall != nil {
				next = *d.NextCall
			}
			if d.Limit != nil {
				limit = *d.Limit
			}
			if d.Unit == "usd" {
				return fmt.Sprintf("run %s (%s): spent $%.6f, the next call would cost $%.6f, the limit is $%.6f",
					d.Status, d.Reason, *d.Used, next, limit)
			}
			return fmt.Sprintf("run %s (%s): used %g %s, the next call would take %g, the limit is %g",
				d.Status, d.Reason, *d.Used, d.Unit, next, limit)
		}
		return fmt.Sprintf("run %s (%s)", d.Status, d.Reason)
	case store.EventLoopDetected:
		d, _ := store.DecodeEvent[store.LoopDetectedData](ev)
		if d.Action == "replan" {
			return fmt.Sprintf("loop detector (%s) fired: the model is told to REPLAN", d.Detector)
		}
		return fmt.Sprintf("loop detector (%s) fired again: escalating to a person", d.Detector)
	case store.EventApprovalRequested:
		d, _ := store.DecodeEvent[store.ApprovalRequestedData](ev)
		return fmt.Sprintf("approval requested: %s (%s); the worker lets go of the run", d.Summary, d.Reason)
	case store.EventApprovalDecided:
		d, _ := store.DecodeEvent[store.ApprovalDecidedData](ev)
		return fmt.Sprintf("approval %s by %s", d.Status, d.By)
	case store.EventResumed:
		d, _ := store.DecodeEvent[store.ResumedData](ev)
		return fmt.Sprintf("resumed by %s after %s", d.By, d.StopReason)
	case store.EventReleased:
		return "lease released"
	}
	return ""
}

// cause drops the context a tool error carries around its cause: "refund
// charge CH-2: no response: outcome unknown: ..." becomes "no response".
func cause(s string) string {
	s = strings.TrimSuffix(s, ": "+belay.ErrUnknownOutcome.Error())
	if _, rest, ok := strings.Cut(s, ": "); ok {
		return rest
	}
	return s
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 110 {
		s = s[:110] + "…"
	}
	return s
}
