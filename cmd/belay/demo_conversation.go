package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/model"
	"github.com/belayrun/belay/store"
)

// belay demo --scenario conversation: the agent finds the duplicate charge
// and asks the customer whether to refund it to their card or as store
// credit. The worker that asked is killed with SIGKILL while the run waits;
// the customer answers the next day (the demo's clock, and its workers',
// move 22 hours ahead); another worker process goes on from the answer,
// the refund lands once, and the run is verified against the world.

// demoDayLater is how far the demo's clock moves while the customer is
// away: the next day, within the conversation's 24 hours.
const demoDayLater = 22 * time.Hour

// demoReply is the customer's answer.
const demoReply = "To my card, please."

// demoClock is the demo's time: the real one, moved ahead when a day
// passes. Its worker processes are started as far ahead (--clock-ahead).
type demoClock struct{ ahead atomic.Int64 }

func (c *demoClock) now() time.Time { return time.Now().Add(time.Duration(c.ahead.Load())) }

func (c *demoClock) advance(d time.Duration) { c.ahead.Add(int64(d)) }

// runConversationScenario runs the conversation scenario on the run the demo
// started, and reports whether it held: one worker killed while the run
// waited, the customer's reply taken once, one refund, the run done and
// verified.
func runConversationScenario(ctx context.Context, rt *belay.Runtime, st store.Store, world *support.World, clock *demoClock,
	printer *tracePrinter, summary demoSummary, db string, workerFlags []string, yes bool, stdout io.Writer, quiet bool) error {
	say := func(format string, a ...any) {
		if !quiet {
			fmt.Fprintf(stdout, format+"\n", a...)
		}
	}
	flags := append(workerFlags, "--conversation")
	say("scenario: the agent asks the customer how to refund; the worker is killed while the run waits;")
	say("          the customer answers the next day, and another worker goes on")
	say("")
	say("[worker 1] a worker process starts; once the run waits for the customer's answer, the demo kills it (SIGKILL)")
	printer.section()
	crashed, err := demoWorker(ctx, db, printer, append(flags, "--crash-at-wait")...)
	if err != nil {
		return err
	}
	run, err := st.GetRun(ctx, belay.AnyTenant, summary.RunID)
	if err != nil {
		return err
	}
	if crashed {
		summary.Crashes++
		say("")
		say("[demo] worker 1 is killed (SIGKILL) while the run waits: it is %s, its question on disk, no worker holding it", run.Status)
	}
	say("")
	clock.advance(demoDayLater)
	say("[demo] a day passes: the demo's clock, and its workers', move %.0f hours ahead (the conversation waits up to 24)", demoDayLater.Hours())
	say("customer> %s", demoReply)
	if _, err := rt.Operator().Say(ctx, run.Tenant, run.ID, belay.Reply{Text: demoReply, Key: "reply-" + summary.Ticket}); err != nil {
		return fmt.Errorf("demo: the customer's reply: %w", err)
	}
	flags = append(flags, "--clock-ahead", demoDayLater.String())
	for i := 2; ; i++ {
		if run, err = st.GetRun(ctx, belay.AnyTenant, summary.RunID); err != nil {
			return err
		}
		if run.Status.Terminal() || i > 5 {
			break
		}
		if run.Status == store.StatusWaitingApproval {
			decided, err := decideDemoApprovals(ctx, rt, st, run.ID, yes, stdout, quiet)
			if err != nil {
				return err
			}
			summary.Approvals.Count += len(decided)
			summary.Approvals.DecidedBy = append(summary.Approvals.DecidedBy, decided...)
			if len(decided) == 0 {
				break
			}
		}
		say("")
		say("[worker %d] a worker process starts on the same store, a day later by the clock", i)
		printer.section()
		if i == 2 && crashed {
			summary.Resumes++
		}
		if _, err := demoWorker(ctx, db, printer, flags...); err != nil {
			return err
		}
		printer.flush(ctx)
	}
	counts, err := world.Counts(ctx)
	if err != nil {
		return err
	}
	waits, err := rt.Operator().PendingWaits(ctx, belay.AnyTenant)
	if err != nil {
		return err
	}
	all, err := st.(store.Waiter).Waits(ctx, store.ListWaitsParams{RunID: run.ID})
	if err != nil {
		return err
	}
	summary.Status, summary.StopReason, summary.Steps = run.Status, run.StopReason, run.Step
	summary.ModelCalls, summary.Final = run.ModelCalls, run.Final
	summary.CostUSD = model.Nanodollars(run.CostNanoUSD).Dollars()
	summary.SideEffects = map[string]int{"refunds": counts.Refunds, "emails": counts.Emails, "notes": counts.Notes}
	held := func() error {
		switch {
		case run.Status != store.StatusDone || run.StopReason != "verified":
			return fmt.Errorf("demo run ended %s (%s), not done and verified", run.Status, run.StopReason)
		case summary.Crashes != 1:
			return fmt.Errorf("demo run ended done, but no worker was killed while it waited (crashes %d)", summary.Crashes)
		case len(all) != 1 || len(waits) != 0:
			return fmt.Errorf("demo run asked %d questions and %d wait still; want one, answered", len(all), len(waits))
		case counts.Refunds != 1:
			return fmt.Errorf("demo run ended with %d refunds, want 1", counts.Refunds)
		}
		return nil
	}
	if quiet {
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
	say("  conversation  asked once, answered %.0f hours later by the clock, after the worker that asked was killed", demoDayLater.Hours())
	say("  approvals     %d, decided by %s", summary.Approvals.Count, strings.Join(summary.Approvals.DecidedBy, ", "))
	say("  side effects  %d refund, %d email, %d CRM note", counts.Refunds, counts.Emails, counts.Notes)
	say("")
	lookCloser(stdout, quiet, run.ID, db, " --scenario conversation")
	return held()
}
