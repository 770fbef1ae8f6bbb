// The multi-process tests of belay serve on PostgreSQL: a fleet killed
// with SIGKILL and a zombie stopped with SIGSTOP, with the cluster they
// share (its schema, world, approver and audit checks) in the same file,
// since the checks are what the tests are.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/belayrun/belay"
	"github.com/belayrun/belay/examples/support"
	"github.com/belayrun/belay/internal/testrun"
	"github.com/belayrun/belay/model/scripted"
	"github.com/belayrun/belay/store"
	"github.com/belayrun/belay/store/postgres"
)

// cluster is a test's PostgreSQL schema and support world, shared by the
// belay serve processes it starts.
type cluster struct {
	db    *testSchema
	world *support.World
	// worldPath is the world's file, which every process opens.
	worldPath string
	// st and rt are the test's own: it starts runs and decides approvals
	// through them, and executes nothing.
	st *postgres.Store
	rt *belay.Runtime

	mu sync.Mutex
	// workers maps each process's application name to its pid.
	workers map[string]int
}

// newCluster seeds a world with tickets, migrates a new schema and adds
// the audit to it.
func newCluster(t *testing.T, tickets int) *cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("SKIPPED in -short mode: starts belay processes")
	}
	ctx := t.Context()
	c := &cluster{db: newTestSchema(t), worldPath: filepath.Join(t.TempDir(), "support.world"), workers: make(map[string]int)}
	var err error
	if c.world, err = support.OpenWorld(ctx, c.worldPath); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.world.Close() })
	if err := c.world.SeedTickets(ctx, tickets); err != nil {
		t.Fatal(err)
	}
	if c.st, err = postgres.Open(ctx, c.db.urlFor(t, "belay-test"), postgres.Config{Schema: c.db.name}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.st.Close() })
	installAudit(ctx, t, c.db)
	c.rt, err = belay.New(belay.Config{Store: c.st, HumanApproval: true,
		Agents: []*belay.Agent{support.NewAgent(c.world, scripted.Func(support.Script()))}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// launch starts a belay serve process named app on the cluster; ready
// waits until it serves.
func (c *cluster) launch(t *testing.T, app string, extra ...string) *proc {
	t.Helper()
	args := append([]string{"serve", "--database-url", c.db.urlFor(t, app), "--schema", c.db.name,
		"--world", c.worldPath, "--lease-ttl", "2s", "--grace", "10s", "--addr", "127.0.0.1:0"}, extra...)
	p := startProc(t, app, args...)
	c.mu.Lock()
	c.workers[app] = p.pid()
	c.mu.Unlock()
	return p
}

func ready(ctx context.Context, t *testing.T, p *proc) {
	t.Helper()
	if _, err := p.waitLine(ctx, p.stdout, "(owner "); err != nil {
		t.Fatalf("%v; stderr:\n%s", err, p.stderr.tail(20))
	}
}

// serve launches a process and waits until it serves.
func (c *cluster) serve(ctx context.Context, t *testing.T, app string, extra ...string) *proc {
	t.Helper()
	p := c.launch(t, app, extra...)
	ready(ctx, t, p)
	return p
}

// startTicket starts a run on seeded ticket i: the ticket is the client
// request id, which the agent's requirements check.
func (c *cluster) startTicket(ctx context.Context, i int) (store.Run, error) {
	tk := support.TicketSeed(i)
	run, _, err := c.rt.StartRun(ctx, belay.RunRequest{Agent: support.AgentName, Tenant: []string{"acme", "globex"}[i%2],
		User: "desk", ClientRequestID: tk.ID, Input: tk.Input()})
	return run, err
}

// progress counts the runs of the schema that are terminal, and all.
func (c *cluster) progress(ctx context.Context) (terminal, total int, err error) {
	err = c.db.queryRow(ctx, `SELECT count(*) FILTER (WHERE status IN ('done', 'failed', 'escalated', 'canceled')), count(*) FROM runs`,
		nil, &terminal, &total)
	return terminal, total, err
}

// approver approves pending approvals as a person would, as they appear,
// until ctx ends. decided counts its decisions; a decision refused because
// the approval was decided already is an error: it decides alone.
type approver struct {
	decided atomic.Int64
	mu      sync.Mutex
	errs    []error
	done    chan struct{}
}

func (c *cluster) startApprover(ctx context.Context, wg *sync.WaitGroup) *approver {
	d := &approver{done: make(chan struct{})}
	wg.Go(func() {
		defer close(d.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			pending, err := c.st.Approvals(ctx, store.ListApprovalsParams{Status: store.ApprovalPending})
			if err != nil && ctx.Err() == nil {
				d.fail(fmt.Errorf("list approvals: %w", err))
			}
			for _, a := range pending {
				_, err := belay.DecideApproval(ctx, c.st, a.Tenant, a.ID, belay.ApprovalDecision{Verdict: "approve", By: "human:test"})
				switch {
				case err == nil:
					d.decided.Add(1)
				case ctx.Err() != nil:
				default:
					d.fail(fmt.Errorf("decide %s of run %s: %w", a.ID, a.RunID, err))
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	return d
}

func (d *approver) fail(err error) {
	d.mu.Lock()
	d.errs = append(d.errs, err)
	d.mu.Unlock()
}

// Four belay serve processes share one PostgreSQL schema and one support
// world and work 500 tickets, while the test kills a random one with SIGKILL
// every few finished runs and starts it again, and a person (the test)
// approves the large refunds as they come. Every run must end done and
// verified; billing, the mailbox and the CRM must hold exactly one refund of
// the duplicate charge, one email and one note per ticket; every approval
// must be decided once; and the database's audit of every write must show
// that no run was held by two live workers at once and that no worker wrote
// under a lease it no longer held.
func TestMultiProcessCrash(t *testing.T) {
	t.Parallel()
	const (
		tickets  = 500
		procs    = 4
		minKills = 10
	)
	c := newCluster(t, tickets)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	// The test's goroutines end before the cluster's store closes.
	var bg sync.WaitGroup
	t.Cleanup(func() { cancel(); bg.Wait() })
	start := time.Now()

	slots := make([]*proc, procs)
	gens := make([]int, procs)
	launchSlot := func(i int) {
		gens[i]++
		slots[i] = c.launch(t, fmt.Sprintf("belay-w%d-%d", i, gens[i]), "--workers", "8")
	}
	for i := range slots {
		launchSlot(i)
	}
	for _, p := range slots {
		ready(ctx, t, p)
	}
	approverCtx, stopApprover := context.WithCancel(ctx)
	d := c.startApprover(approverCtx, &bg)
	// The runs are created while the workers run them and die. runs is
	// the creator's until it sends on created.
	runs := make(map[string]int, tickets) // run id -> ticket
	created := make(chan error, 1)
	bg.Go(func() {
		for i := range tickets {
			run, err := c.startTicket(ctx, i)
			if err != nil {
				created <- err
				return
			}
			runs[run.ID] = i
		}
		created <- nil
	})

	// Kill a random worker each time 8 to 20 more runs have finished, or
	// after a second without a kill, and start it again at once. A kill
	// lands at any point of the 8 runs each worker has in flight.
	kills := 0
	nextKill := func(terminal int) int { return terminal + 8 + rand.IntN(13) }
	lastKill, killAtTerminal := time.Now(), nextKill(0)
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for {
		terminal, total, err := c.progress(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if terminal == total && total == tickets {
			break
		}
		select {
		case err := <-created:
			if err != nil {
				t.Fatalf("start runs: %v", err)
			}
			created = nil
		default:
		}
		for _, p := range slots {
			if p.exited() {
				t.Fatalf("%s exited on its own (%v); stderr:\n%s", p.name, p.err, p.stderr.tail(30))
			}
		}
		if terminal >= killAtTerminal || time.Since(lastKill) > time.Second {
			i := rand.IntN(procs)
			mark(ctx, t, c.db, slots[i].name, "kill")
			slots[i].kill(t)
			kills++
			launchSlot(i)
			ready(ctx, t, slots[i])
			lastKill, killAtTerminal = time.Now(), nextKill(terminal)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after %v and %d kills, %d of %d runs are terminal: %v", time.Since(start).Round(time.Millisecond), kills, terminal, total, ctx.Err())
		case <-poll.C:
		}
	}
	elapsed := time.Since(start)
	if created != nil {
		if err := <-created; err != nil {
			t.Fatalf("start runs: %v", err)
		}
	}
	stopApprover()
	<-d.done
	for _, p := range slots {
		p.terminate(ctx, t)
		if _, err := p.waitLine(ctx, p.stdout, "stopped; leases released"); err != nil {
			t.Error(err)
		}
	}
	t.Logf("%d runs terminal in %v with %d kills; %d approvals decided", tickets, elapsed.Round(time.Millisecond), kills, d.decided.Load())
	if kills < minKills {
		t.Errorf("%d kills, want at least %d: the runs finished too fast for the test to mean much", kills, minKills)
	}
	for _, err := range d.errs {
		t.Errorf("approver: %v", err)
	}

	checkRunsDone(t, c, runs)
	checkWorld(t, c, tickets)
	checkApprovals(t, c, runs, d.decided.Load())
	rep := checkAudit(t, readAudit(ctx, t, c.db), c.workers)
	checkClaimEvents(t, c, runs, rep)
	t.Logf("claims: %d of free runs, %d of expired leases of killed workers, %d of expired leases of live (stalled) workers, %d taken from killed workers before expiry",
		rep.free, rep.expiredKilled, rep.expiredLive, rep.fromKilled)
	if rep.fromKilled == 0 {
		t.Errorf("no run was taken over from a killed worker: the kills never hit a run in flight")
	}
}

// checkRunsDone checks that every run ended done and verified, with its
// lease released, and says how the others ended.
func checkRunsDone(t *testing.T, c *cluster, runs map[string]int) {
	t.Helper()
	all, err := c.st.ListRuns(t.Context(), store.ListRunsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(runs) {
		t.Errorf("%d runs in the store, want %d", len(all), len(runs))
	}
	bad := 0
	for _, run := range all {
		if run.Status == store.StatusDone && run.StopReason == "verified" && run.LeaseOwner == "" {
			continue
		}
		if bad++; bad <= 10 {
			t.Errorf("run %s (%s) ended %s (%s: %s), lease owner %q", run.ID, run.ClientRequestID, run.Status, run.StopReason, run.StopDetail, run.LeaseOwner)
			// What the run saw: its answer and its trace, to tell why.
			t.Logf("  its final answer: %s", run.Final)
			if events, err := c.st.Events(t.Context(), run.ID); err == nil {
				for _, e := range events {
					t.Logf("  step %d %s %s", e.Step, e.Type, e.Data)
				}
			}
		}
	}
	if bad > 10 {
		t.Errorf("... and %d more runs not done", bad-10)
	}
}

// checkWorld checks each ticket against billing, the mailbox and the CRM:
// one refund, of the duplicate charge, for its amount; one email to the
// customer; one note on the ticket.
func checkWorld(t *testing.T, c *cluster, tickets int) {
	t.Helper()
	ctx := t.Context()
	states, err := c.world.TicketStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i := range tickets {
		tk := support.TicketSeed(i)
		s := states[tk.ID]
		if s == nil {
			t.Fatalf("ticket %s is not in the world", tk.ID)
		}
		ok := len(s.Refunds) == 1 && s.Refunds[0].ChargeID == tk.DuplicateChargeID && s.Refunds[0].AmountCents == tk.AmountCents &&
			len(s.Emails) == 1 && s.Emails[0].To == tk.Email && len(s.Notes) == 1
		if ok {
			continue
		}
		if bad++; bad <= 10 {
			t.Errorf("%s: refunds %+v (want one of %s for %d cents), %d emails, %d notes (want one each)",
				tk.ID, s.Refunds, tk.DuplicateChargeID, tk.AmountCents, len(s.Emails), len(s.Notes))
		}
	}
	if bad > 10 {
		t.Errorf("... and %d more tickets wrong", bad-10)
	}
	// Nothing outside the tickets: T-1001 was seeded and never worked.
	counts, err := c.world.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := (support.Counts{Refunds: tickets, Emails: tickets, Notes: tickets}); counts != want {
		t.Errorf("world holds %+v, want %+v", counts, want)
	}
}

// checkApprovals checks that every refund above 50 USD was asked for once
// and approved once, by the test's person, and that nothing else was asked.
func checkApprovals(t *testing.T, c *cluster, runs map[string]int, decided int64) {
	t.Helper()
	ctx := t.Context()
	approvals, err := c.st.Approvals(ctx, store.ListApprovalsParams{})
	if err != nil {
		t.Fatal(err)
	}
	perRun := make(map[string][]store.Approval)
	for _, a := range approvals {
		perRun[a.RunID] = append(perRun[a.RunID], a)
		if a.Status != store.ApprovalApproved || a.DecidedBy != "human:test" || a.Tool != "issue_refund" {
			t.Errorf("approval %s of run %s: %s by %q for %s, want approved by human:test for issue_refund",
				a.ID, a.RunID, a.Status, a.DecidedBy, a.Tool)
		}
	}
	want := 0
	for id, i := range runs {
		n := 0
		if support.TicketSeed(i).AmountCents > 5000 {
			n = 1
		}
		want += n
		if len(perRun[id]) != n {
			t.Errorf("run %s (ticket %s, %d cents) has %d approvals, want %d", id, support.TicketSeed(i).ID,
				support.TicketSeed(i).AmountCents, len(perRun[id]), n)
		}
	}
	if len(approvals) != want || decided != int64(want) {
		t.Errorf("%d approvals asked, %d decided by the test; want %d of each", len(approvals), decided, want)
	}
}

// checkClaimEvents checks each run's trace: the claimed events come in
// strictly increasing epochs, each names the owner that the audit saw take
// that epoch, and every approval of the run is decided once in it.
func checkClaimEvents(t *testing.T, c *cluster, runs map[string]int, rep auditReport) {
	t.Helper()
	ctx := t.Context()
	bad := 0
	report := func(format string, args ...any) {
		if bad++; bad <= 10 {
			t.Errorf(format, args...)
		}
	}
	for id := range runs {
		events, err := c.st.Events(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		last := int64(0)
		decided := make(map[string]int)
		for _, e := range events {
			switch e.Type {
			case "claimed":
				var data struct {
					Epoch int64  `json:"epoch"`
					Owner string `json:"owner"`
				}
				if err := json.Unmarshal(e.Data, &data); err != nil {
					t.Fatal(err)
				}
				if data.Epoch <= last {
					report("run %s: claimed at epoch %d after epoch %d (event %d)", id, data.Epoch, last, e.Seq)
				}
				last = data.Epoch
				if claim, ok := rep.claims[runEpoch{id, data.Epoch}]; !ok || claim.Owner != data.Owner {
					report("run %s: claimed event at epoch %d names %s; the audit saw %+v", id, data.Epoch, data.Owner, claim)
				}
			case "approval_decided":
				var data struct {
					ID string `json:"approval_id"`
				}
				if err := json.Unmarshal(e.Data, &data); err != nil {
					t.Fatal(err)
				}
				decided[data.ID]++
			}
		}
		if last == 0 {
			report("run %s: no claimed event", id)
		}
		for a, n := range decided {
			if n != 1 {
				report("run %s: approval %s decided %d times in the trace", id, a, n)
			}
		}
	}
	if bad > 10 {
		t.Errorf("... and %d more trace problems", bad-10)
	}
}

// A worker stopped (SIGSTOP) in the middle of a call, past its lease, is a
// zombie: another worker takes the run at a higher epoch and finishes it.
// When the zombie continues (SIGCONT) its lease has run out by its own
// clock, so it gives up the call it was in before the call ran, and every
// write it attempts under its stale epoch is refused; each side effect
// happened once.
//
// Worker A's add_internal_note waits 20s before it runs (--slow-tool), so A
// is stopped with the note's intent in the ledger and the call not made.
// The CRM has no idempotency keys: a note A added after B would be a second
// note, which is what the test looks for. B does not ask the CRM about the
// note at once: A's call could still be on its way, so B waits until A's
// call can no longer be in flight (its timeout from when A sent it), then
// asks, finds nothing, and adds the note.
func TestZombieWorkerIsFenced(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	tk := support.TicketSeed(0)
	if tk.AmountCents > 5000 {
		t.Fatalf("ticket %s refunds %d cents: want one that needs no approval", tk.ID, tk.AmountCents)
	}

	a := c.serve(ctx, t, "belay-zombie-a", "--workers", "1", "--slow-tool", "add_internal_note:20s")
	run, err := c.startTicket(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.waitLine(ctx, a.stdout, slowMarker+" add_internal_note"); err != nil {
		t.Fatalf("%v; stderr:\n%s", err, a.stderr.tail(20))
	}
	held, err := c.st.GetRun(ctx, run.Tenant, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if held.Status != store.StatusRunning || held.LeaseEpoch != 1 || ownerPID(held.LeaseOwner) != a.pid() {
		t.Fatalf("before the stop: run %s at epoch %d owned by %s, want running at epoch 1 owned by A (pid %d)",
			held.Status, held.LeaseEpoch, held.LeaseOwner, a.pid())
	}

	stopSeq := mark(ctx, t, c.db, a.name, "sigstop")
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "A to stop", func() bool { return a.state() == "T" })

	// A's pid is alive, so B cannot take the run as a dead worker's: it
	// waits for the lease to expire.
	b := c.serve(ctx, t, "belay-zombie-b", "--workers", "1")
	var finished store.Run
	waitFor(ctx, t, "the run to finish on B while A is stopped", func() bool {
		finished, err = c.st.GetRun(ctx, run.Tenant, run.ID)
		return err == nil && finished.Status.Terminal()
	})
	if a.state() != "T" {
		t.Fatalf("A is in state %q, not stopped, after B finished", a.state())
	}
	events, err := c.st.Events(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	messages, err := c.st.Messages(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}

	contSeq := mark(ctx, t, c.db, a.name, "sigcont")
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// A wakes past its lease by its own clock and gives up the call it was
	// in before the call ran, without waiting to hear from the store.
	renewCtx, cancelRenew := context.WithTimeout(ctx, 10*time.Second)
	defer cancelRenew()
	gaveUp, err := a.waitLine(renewCtx, a.stdout, slowMarker+" add_internal_note cancelled:")
	if err != nil {
		t.Fatalf("%v; stderr:\n%s", err, a.stderr.tail(20))
	}
	// Past both its lease and its own timeout, whichever timer ran first
	// on waking is the cause.
	if !strings.Contains(gaveUp, "lease expired") && !strings.HasSuffix(gaveUp, store.ErrLeaseLost.Error()) &&
		!strings.HasSuffix(gaveUp, context.DeadlineExceeded.Error()) {
		t.Errorf("A gave up its call because %q, want its lease expired or lost, or its time up", gaveUp)
	}
	if _, err := a.waitLine(renewCtx, a.stderr, "gave up the run"); err != nil {
		if _, err := a.waitLine(renewCtx, a.stderr, "lease lost"); err != nil {
			t.Errorf("A did not log that it gave up the run: %v; stderr:\n%s", err, a.stderr.tail(20))
		}
	}
	for _, p := range []*proc{a, b} {
		stopCtx, cancelStop := context.WithTimeout(ctx, 15*time.Second)
		p.terminate(stopCtx, t)
		if _, err := p.waitLine(stopCtx, p.stdout, "stopped; leases released"); err != nil {
			t.Error(err)
		}
		cancelStop()
	}

	// B took the run by expiry at epoch 2 while A was stopped, waited out
	// A's call, and finished it at epoch 3.
	if finished.Status != store.StatusDone || finished.StopReason != "verified" || finished.LeaseEpoch != 3 {
		t.Errorf("run ended %s (%s: %s) at epoch %d, want done (verified) at epoch 3",
			finished.Status, finished.StopReason, finished.StopDetail, finished.LeaseEpoch)
	}
	rep := checkAudit(t, readAudit(ctx, t, c.db), c.workers)
	second, ok := rep.claims[runEpoch{run.ID, 2}]
	switch {
	case !ok:
		t.Errorf("no claim of epoch 2 in the audit")
	case second.App != b.name || ownerPID(second.OldOwner) != a.pid() || second.OldExpires > second.At:
		t.Errorf("epoch 2: %v, want B taking A's expired lease", second)
	case second.Seq < stopSeq || second.Seq > contSeq:
		t.Errorf("epoch 2 claimed at audit %d, not while A was stopped (audit %d to %d)", second.Seq, stopSeq, contSeq)
	}
	if third, ok := rep.claims[runEpoch{run.ID, 3}]; !ok || third.App != b.name {
		t.Errorf("epoch 3: %v, want B claiming the run again once A's call was over", third)
	}
	if len(rep.claims) != 3 {
		t.Errorf("%d claims, want A's and B's two", len(rep.claims))
	}
	checkClaimEvents(t, c, map[string]int{run.ID: 0}, rep)

	// A changed nothing after it continued: the run, its trace and its
	// conversation are as B left them.
	after, err := c.st.GetRun(ctx, run.Tenant, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.UpdatedAt != finished.UpdatedAt || after.Status != finished.Status || after.LeaseEpoch != 3 || after.LeaseOwner != "" {
		t.Errorf("after A continued the run is %s at epoch %d owned by %q (updated %v), B left it %s (updated %v)",
			after.Status, after.LeaseEpoch, after.LeaseOwner, after.UpdatedAt, finished.Status, finished.UpdatedAt)
	}
	eventsAfter, _ := c.st.Events(ctx, run.ID)
	messagesAfter, _ := c.st.Messages(ctx, run.ID)
	if len(eventsAfter) != len(events) || len(messagesAfter) != len(messages) {
		t.Errorf("after A continued: %d events and %d messages, B left %d and %d",
			len(eventsAfter), len(messagesAfter), len(events), len(messages))
	}

	// Each side effect once, the note included: B asked the CRM for the
	// note A had begun, found none, and added it; A never did.
	s, err := c.world.TicketState(ctx, tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Refunds) != 1 || len(s.Emails) != 1 || len(s.Notes) != 1 {
		t.Errorf("ticket %s: %d refunds, %d emails, %d notes; want one of each", tk.ID, len(s.Refunds), len(s.Emails), len(s.Notes))
	}
	effects, err := c.st.Effects(ctx, run.Tenant, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	notes := 0
	for _, e := range effects {
		if e.Tool != "add_internal_note" {
			continue
		}
		notes++
		if e.State != store.EffectDone || e.Attempts != 2 {
			t.Errorf("note in the ledger: %s after %d attempts, want done after 2 (A's, stopped, and B's)", e.State, e.Attempts)
		}
	}
	if notes != 1 {
		t.Errorf("%d notes in the ledger, want 1", notes)
	}
	reconciled, waited := false, false
	for _, e := range eventsAfter {
		reconciled = reconciled || e.Type == "reconcile" && strings.Contains(string(e.Data), `"add_internal_note"`)
		waited = waited || e.Type == "effect_in_flight" && strings.Contains(string(e.Data), `"add_internal_note"`)
	}
	if !reconciled || !waited {
		t.Errorf("B waited for A's note to be over: %v; asked the CRM about it: %v; want both", waited, reconciled)
	}
	t.Logf("A (pid %d) stopped at audit %d, B took epoch 2 at audit %d, A continued at audit %d: %s",
		a.pid(), stopSeq, second.Seq, contSeq, gaveUp)
}

// waitFor polls cond until it holds, failing the test when ctx ends.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := testrun.WaitUntil(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
