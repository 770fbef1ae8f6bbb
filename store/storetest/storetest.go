// Package storetest is the conformance suite every store driver passes. A
// behaviour of the store gets a case here before a driver implements it.
package storetest

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/belayrun/belay/store"
)

// Run runs every case against the stores open returns. Cases run in
// parallel; open is called once per case and must return a new, empty store
// that it closes when the test ends (t.Cleanup).
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	cases := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"CreateRunIdempotent", testCreateRunIdempotent},
		{"RunSensitive", testRunSensitive},
		{"GetRunTenantScope", testGetRunTenantScope},
		{"ListRunsFilters", testListRunsFilters},
		{"ListRunsPaging", testListRunsPaging},
		{"ClaimQueued", testClaimQueued},
		{"ClaimSkipsLiveLease", testClaimSkipsLiveLease},
		{"ClaimPausedWhenDue", testClaimPausedWhenDue},
		{"ClaimOnlyTheseAgents", testClaimOnlyTheseAgents},
		{"ClaimNeverWaitingOrTerminal", testClaimNeverWaitingOrTerminal},
		{"ClaimLimitAndOrder", testClaimLimitAndOrder},
		{"ClaimConcurrent", testClaimConcurrent},
		{"ClaimTakenFrom", testClaimTakenFrom},
		{"TakeOver", testTakeOver},
		{"LeasedRuns", testLeasedRuns},
		{"RenewLease", testRenewLease},
		{"CheckpointRoundTrip", testCheckpointRoundTrip},
		{"CheckpointStaleEpoch", testCheckpointStaleEpoch},
		{"CheckpointTerminal", testCheckpointTerminal},
		{"CheckpointKeepLease", testCheckpointKeepLease},
		{"LeaseRelease", testLeaseRelease},
		{"MessagesAppendOnly", testMessagesAppendOnly},
		{"MessageBytes", testMessageBytes},
		{"EventsOrdered", testEventsOrdered},
		{"EventsAfter", testEventsAfter},
		{"LongCheckpoint", testLongCheckpoint},
		{"BeginEffect", testBeginEffect},
		{"BeginEffectTenantScope", testBeginEffectTenantScope},
		{"BeginEffectStaleFence", testBeginEffectStaleFence},
		{"BeginEffectAfterFailure", testBeginEffectAfterFailure},
		{"EffectWritesRenewTheLease", testEffectWritesRenewTheLease},
		{"EndCalls", testEndCalls},
		{"CheckpointSettlesEffect", testCheckpointSettlesEffect},
		{"CheckpointMissingEffect", testCheckpointMissingEffect},
		{"ConcurrentCheckpoints", testConcurrentCheckpoints},
		{"BudgetAndEscalation", testBudgetAndEscalation},
		{"OutboxWithCheckpoint", testOutboxWithCheckpoint},
		{"ResumeRun", testResumeRun},
		{"ResumeSettlesEffects", testResumeSettlesEffects},
		{"ResumeMigratesVersion", testResumeMigratesVersion},
		{"KillSwitch", testKillSwitch},
		{"ApprovalsPersistAndReplay", testApprovalsPersistAndReplay},
		{"DecideApproval", testDecideApproval},
		{"ApprovalExpiry", testApprovalExpiry},
		{"ExpireDueApprovals", testExpireDueApprovals},
		{"WaitPersistsAndReplays", testWaitPersistsAndReplays},
		{"AnswerWaitOnce", testAnswerWaitOnce},
		{"AnswerWaitNotWaiting", testAnswerWaitNotWaiting},
		{"CancelClosesWaits", testCancelClosesWaits},
		{"WaitsPages", testWaitsPages},
		{"WaitExpiry", testWaitExpiry},
		{"WaitOfARunningRun", testWaitOfARunningRun},
		{"PruneRemovesWaits", testPruneRemovesWaits},
		{"SignalAnswersWait", testSignalAnswersWait},
		{"SignalKeptUntilWait", testSignalKeptUntilWait},
		{"SignalToEndedRun", testSignalToEndedRun},
		{"CreateRunNotBefore", testCreateRunNotBefore},
		{"Counts", testCounts},
		{"PruneRuns", testPruneRuns},
		{"Refusals", testRefusals},
		{"ForkRun", testForkRun},
		{"ForkPrune", testForkPrune},
		{"ApprovalParentEffect", testApprovalParentEffect},
		{"MoveVersion", testMoveVersion},
		{"RunsByVersion", testRunsByVersion},
		{"ScheduleRoundTrip", testScheduleRoundTrip},
		{"SchedulesDue", testSchedulesDue},
		{"ScheduleFiringOnce", testScheduleFiringOnce},
	}
	cases = append(cases, flowCases...)
	cases = append(cases, fleetCases...)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, open(t))
		})
	}
}

// t0 has nanoseconds so that a store rounding times fails.
var t0 = time.Date(2025, 3, 14, 15, 9, 26, 535897932, time.UTC)

// uniq returns an id no other case uses, so that cases stay independent
// even if a driver shares one database between them.
func uniq(prefix string) string {
	return prefix + "-" + rand.Text()[:12]
}

// newRun creates a queued run with the given fields, filling in the rest.
func newRun(t *testing.T, s store.Store, p store.CreateRunParams) store.Run {
	t.Helper()
	if p.ID == "" {
		p.ID = uniq("run")
	}
	if p.Tenant == "" {
		p.Tenant = uniq("tenant")
	}
	if p.User == "" {
		p.User = "user-1"
	}
	if p.Agent == "" {
		p.Agent = "support"
	}
	if p.Now.IsZero() {
		p.Now = t0
	}
	r, created, err := s.CreateRun(t.Context(), p)
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	if !created {
		t.Fatalf("CreateRun %s: created false for a new run", p.ID)
	}
	return r
}

// claimAll claims every run due at now.
func claimAll(t *testing.T, s store.Store, owner string, now time.Time, ttl time.Duration) []store.Run {
	t.Helper()
	runs, err := s.ClaimRuns(t.Context(), store.ClaimRunsParams{Owner: owner, Now: now, TTL: ttl, Limit: 1000})
	if err != nil {
		t.Fatalf("ClaimRuns: %v", err)
	}
	return runs
}

// claimRun claims the due runs and returns the one with id, which must be
// among them.
func claimRun(t *testing.T, s store.Store, id, owner string, now time.Time, ttl time.Duration) store.Run {
	t.Helper()
	for _, r := range claimAll(t, s, owner, now, ttl) {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("ClaimRuns at %s did not claim run %s", now, id)
	return store.Run{}
}

func fence(r store.Run) store.Fence {
	return store.Fence{RunID: r.ID, Owner: r.LeaseOwner, Epoch: r.LeaseEpoch}
}

// update is a RunUpdate that changes nothing of r and keeps its lease.
func update(r store.Run) store.RunUpdate {
	return store.RunUpdate{
		Status:       r.Status,
		Step:         r.Step,
		Messages:     r.Messages,
		InputTokens:  r.InputTokens,
		OutputTokens: r.OutputTokens,
		ModelCalls:   r.ModelCalls,
		CostNanoUSD:  r.CostNanoUSD,
		Plan:         r.Plan,
		Guard:        r.Guard,
		ResumeAfter:  r.ResumeAfter,
		StopReason:   r.StopReason,
		StopDetail:   r.StopDetail,
		Final:        r.Final,
		Escalation:   r.Escalation,
		LeaseExpires: r.LeaseExpires,
	}
}

func checkpoint(t *testing.T, s store.Store, p store.CheckpointParams) {
	t.Helper()
	if err := s.Checkpoint(t.Context(), p); err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
}

// park moves a claimed run to status and lets go of its lease.
func park(t *testing.T, s store.Store, r store.Run, status store.Status, resumeAfter time.Time) {
	t.Helper()
	u := update(r)
	u.Status = status
	u.ResumeAfter = resumeAfter
	u.LeaseExpires = time.Time{}
	checkpoint(t, s, store.CheckpointParams{Fence: fence(r), Now: r.UpdatedAt, Run: u})
}

func getRun(t *testing.T, s store.Store, id string) store.Run {
	t.Helper()
	r, err := s.GetRun(t.Context(), "", id)
	if err != nil {
		t.Fatalf("GetRun %s: %v", id, err)
	}
	return r
}

func messages(t *testing.T, s store.Store, runID string) []store.Message {
	t.Helper()
	ms, err := s.Messages(t.Context(), runID)
	if err != nil {
		t.Fatalf("Messages: %v", err)
	}
	return ms
}

func events(t *testing.T, s store.Store, runID string) []store.Event {
	t.Helper()
	es, err := s.Events(t.Context(), runID)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	return es
}

func effects(t *testing.T, s store.Store, tenant, runID string) []store.Effect {
	t.Helper()
	es, err := s.Effects(t.Context(), tenant, runID)
	if err != nil {
		t.Fatalf("Effects: %v", err)
	}
	return es
}

func ids(runs []store.Run) []string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.ID
	}
	return out
}

// diff collects the fields in which two rows differ. Times compare with
// Equal, bytes with bytes.Equal (nil equals empty), the rest with ==.
type diff []string

func (d *diff) eq(name string, got, want any) {
	switch g := got.(type) {
	case time.Time:
		if !g.Equal(want.(time.Time)) {
			*d = append(*d, fmt.Sprintf("%s: got %s, want %s", name, g, want))
		}
	case json.RawMessage:
		if !bytes.Equal(g, want.(json.RawMessage)) {
			*d = append(*d, fmt.Sprintf("%s: got %q, want %q", name, g, want))
		}
	case []byte:
		if !bytes.Equal(g, want.([]byte)) {
			*d = append(*d, fmt.Sprintf("%s: got %q, want %q", name, g, want))
		}
	default:
		if !reflect.DeepEqual(got, want) {
			*d = append(*d, fmt.Sprintf("%s: got %v, want %v", name, got, want))
		}
	}
}

func (d diff) report(t *testing.T, what string) {
	t.Helper()
	for _, line := range d {
		t.Errorf("%s: %s", what, line)
	}
}

func checkRun(t *testing.T, what string, got, want store.Run) {
	t.Helper()
	var d diff
	d.eq("ID", got.ID, want.ID)
	d.eq("Tenant", got.Tenant, want.Tenant)
	d.eq("User", got.User, want.User)
	d.eq("ClientRequestID", got.ClientRequestID, want.ClientRequestID)
	d.eq("Agent", got.Agent, want.Agent)
	d.eq("AgentVersion", got.AgentVersion, want.AgentVersion)
	d.eq("Input", got.Input, want.Input)
	d.eq("DryRun", got.DryRun, want.DryRun)
	d.eq("Status", got.Status, want.Status)
	d.eq("Step", got.Step, want.Step)
	d.eq("Messages", got.Messages, want.Messages)
	d.eq("InputTokens", got.InputTokens, want.InputTokens)
	d.eq("OutputTokens", got.OutputTokens, want.OutputTokens)
	d.eq("ModelCalls", got.ModelCalls, want.ModelCalls)
	d.eq("CostNanoUSD", got.CostNanoUSD, want.CostNanoUSD)
	d.eq("Plan", got.Plan, want.Plan)
	d.eq("Guard", got.Guard, want.Guard)
	d.eq("LeaseOwner", got.LeaseOwner, want.LeaseOwner)
	d.eq("LeaseExpires", got.LeaseExpires, want.LeaseExpires)
	d.eq("LeaseEpoch", got.LeaseEpoch, want.LeaseEpoch)
	d.eq("ResumeAfter", got.ResumeAfter, want.ResumeAfter)
	d.eq("StopReason", got.StopReason, want.StopReason)
	d.eq("StopDetail", got.StopDetail, want.StopDetail)
	d.eq("Final", got.Final, want.Final)
	d.eq("Budget", got.Budget, want.Budget)
	d.eq("Escalation", got.Escalation, want.Escalation)
	d.eq("Sensitive", recorded(got.Sensitive), recorded(want.Sensitive))
	d.eq("ConcurrencyKey", got.ConcurrencyKey, want.ConcurrencyKey)
	d.eq("ConcurrencyLimit", got.ConcurrencyLimit, want.ConcurrencyLimit)
	d.eq("Priority", got.Priority, want.Priority)
	d.eq("CreatedAt", got.CreatedAt, want.CreatedAt)
	d.eq("UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	d.report(t, what)
}

// recorded is a run's record of its secrets as checkRun compares it: a run
// created with none records none (testRunSensitive tells the two apart).
func recorded(m map[string]store.SensitiveArgs) map[string]store.SensitiveArgs {
	if m == nil {
		return map[string]store.SensitiveArgs{}
	}
	return m
}

func checkMessages(t *testing.T, what string, got, want []store.Message) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d messages, want %d", what, len(got), len(want))
		return
	}
	var d diff
	for i := range got {
		g, w := got[i], want[i]
		p := fmt.Sprintf("message %d ", i)
		d.eq(p+"RunID", g.RunID, w.RunID)
		d.eq(p+"Seq", g.Seq, w.Seq)
		d.eq(p+"Step", g.Step, w.Step)
		d.eq(p+"Role", g.Role, w.Role)
		d.eq(p+"Content", g.Content, w.Content)
		d.eq(p+"CreatedAt", g.CreatedAt, w.CreatedAt)
	}
	d.report(t, what)
}

// checkEvents compares events except Seq, which the store assigns; each
// run's Seq must grow strictly.
func checkEvents(t *testing.T, what string, got, want []store.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d events, want %d", what, len(got), len(want))
		return
	}
	var d diff
	last := map[string]int64{}
	for i := range got {
		g, w := got[i], want[i]
		p := fmt.Sprintf("event %d ", i)
		d.eq(p+"RunID", g.RunID, w.RunID)
		d.eq(p+"Step", g.Step, w.Step)
		d.eq(p+"Type", g.Type, w.Type)
		d.eq(p+"Time", g.Time, w.Time)
		d.eq(p+"Data", g.Data, w.Data)
		if prev, ok := last[g.RunID]; ok && g.Seq <= prev {
			d = append(d, fmt.Sprintf("%sSeq %d after %d of its run: want increasing", p, g.Seq, prev))
		}
		last[g.RunID] = g.Seq
	}
	d.report(t, what)
}

func checkEffect(t *testing.T, what string, got, want store.Effect) {
	t.Helper()
	var d diff
	d.eq("Tenant", got.Tenant, want.Tenant)
	d.eq("Key", got.Key, want.Key)
	d.eq("RunID", got.RunID, want.RunID)
	d.eq("Tool", got.Tool, want.Tool)
	d.eq("ArgsHash", got.ArgsHash, want.ArgsHash)
	d.eq("Args", got.Args, want.Args)
	d.eq("State", got.State, want.State)
	d.eq("Result", got.Result, want.Result)
	d.eq("Step", got.Step, want.Step)
	d.eq("Attempts", got.Attempts, want.Attempts)
	d.eq("Epoch", got.Epoch, want.Epoch)
	d.eq("InFlightUntil", got.InFlightUntil, want.InFlightUntil)
	d.eq("CreatedAt", got.CreatedAt, want.CreatedAt)
	d.eq("UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	d.report(t, what)
}
