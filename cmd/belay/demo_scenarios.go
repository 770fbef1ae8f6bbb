package main

import (
	"context"
	"fmt"
	"io"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
)

// guardScenario is a demo of one guard: a model that misbehaves in one way,
// and what Belay does about it.
type guardScenario struct {
	intro  string
	script scripted.Script
	// adjust changes the support agent for the scenario.
	adjust func(*belay.Agent)
	// raise, if set, is what an operator adds to continue the stopped run.
	raise *belay.Raise
	want  store.Status
}

var guardScenarios = map[string]guardScenario{
	"stuck": {
		intro:  "the model drifts: it keeps searching the knowledge base with new words and never acts. Every query differs, so only the no-progress detector can see it",
		script: support.ScriptStuck(),
		want:   store.StatusEscalated,
	},
	"budget": {
		intro:  "the run has a budget of $0.0012; the whole job costs about $0.0016, so it stops before the call that would overspend, and an operator raises the budget by $0.002",
		script: support.Script(),
		adjust: func(a *belay.Agent) { a.Budget.MaxUSD = 0.0012 },
		raise:  &belay.Raise{USD: 0.002},
		want:   store.StatusDone,
	},
	"unverified": {
		intro:  "the model forgets the internal note and says it is done; verification checks the CRM, not the model's word",
		script: support.ScriptWithoutNote(),
		want:   store.StatusEscalated,
	},
}

// runGuardScenario runs the scenario's run in this process, printing its
// trace, and shows the escalation packet it ends with.
func runGuardScenario(ctx context.Context, name string, sc guardScenario, rt *belay.Runtime, st store.Store, world *support.World,
	printer *tracePrinter, summary demoSummary, stdout io.Writer, quiet bool) error {
	say := func(format string, a ...any) {
		if !quiet {
			fmt.Fprintf(stdout, format+"\n", a...)
		}
	}
	say("scenario: %s", sc.intro)
	say("")
	drain := func() error {
		// The refund's approval is granted as policy:demo-auto: these
		// scenarios are about the guards.
		for {
			if err := rt.Drain(ctx); err != nil {
				return err
			}
			printer.flush(ctx)
			by, err := decideDemoApprovals(ctx, rt, st, summary.RunID, true, stdout, true)
			if err != nil {
				return err
			}
			if len(by) == 0 {
				return nil
			}
			summary.Approvals.Count += len(by)
			summary.Approvals.DecidedBy = append(summary.Approvals.DecidedBy, by...)
		}
	}
	if err := drain(); err != nil {
		return err
	}
	run, err := st.GetRun(ctx, belay.AnyTenant, summary.RunID)
	if err != nil {
		return err
	}
	if sc.raise != nil && run.Status == store.StatusPaused {
		summary.Escalation = run.Escalation
		if !quiet {
			fmt.Fprintln(stdout)
			printPacket(stdout, run.Escalation)
		}
		say("")
		say("[operator] raises the budget and resumes the run: belay resume %s --add-usd %g", run.ID, sc.raise.USD)
		say("")
		printer.section()
		if _, err := rt.Operator().Resume(ctx, run.Tenant, run.ID, *sc.raise, "human:demo-operator"); err != nil {
			return err
		}
		summary.Resumes++
		if err := drain(); err != nil {
			return err
		}
		if run, err = st.GetRun(ctx, belay.AnyTenant, summary.RunID); err != nil {
			return err
		}
	}
	counts, err := world.Counts(ctx)
	if err != nil {
		return err
	}
	summary.Status, summary.StopReason, summary.Steps = run.Status, run.StopReason, run.Step
	summary.ModelCalls, summary.Final = run.ModelCalls, run.Final
	summary.CostUSD = model.Nanodollars(run.CostNanoUSD).Dollars()
	summary.SideEffects = map[string]int{"refunds": counts.Refunds, "emails": counts.Emails, "notes": counts.Notes}
	if run.Escalation != nil {
		summary.Escalation = run.Escalation
	}
	failed := func() error {
		if run.Status != sc.want {
			return fmt.Errorf("demo run ended %s (%s), want %s", run.Status, run.StopReason, sc.want)
		}
		return nil
	}
	if quiet {
		// The summary goes out either way; the exit status says whether
		// the scenario held.
		if err := writeJSON(stdout, summary); err != nil {
			return err
		}
		return failed()
	}
	say("")
	if run.Status == store.StatusEscalated && run.Escalation != nil {
		printPacket(stdout, run.Escalation)
		say("")
	}
	say("summary")
	say("  status        %s", statusWords(run))
	say("  work          %d steps, %d model calls, cost $%.6f", run.Step, run.ModelCalls, summary.CostUSD)
	say("  side effects  %d refund, %d email, %d CRM note", counts.Refunds, counts.Emails, counts.Notes)
	say("")
	lookCloser(stdout, quiet, run.ID, summary.DB, " --scenario "+name)
	return failed()
}
