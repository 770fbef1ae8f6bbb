// Package store defines the seam between Belay's runtime and its databases:
// the row types that cross it and the Store interface each driver implements.
//
// The interface is not meant to be implemented outside this module; drivers
// live in sibling packages (store/sqlite, store/postgres) and all pass the
// conformance suite in store/storetest.
//
// This file is the seam itself, and long for it: the Store interface with
// the row types and Params structs its methods take, kept together so a
// driver's author reads the whole contract in one place. The trace event
// catalogue (catalogue.go), the shared checks (check.go) and the optional
// capabilities are in files of their own.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

var (
	// ErrNotFound: no row with that id in that tenant.
	ErrNotFound = errors.New("not found")
	// ErrLeaseLost: the write was fenced off because another worker claimed
	// the run at a higher epoch, or the run has ended. Nothing was written.
	ErrLeaseLost = errors.New("lease lost")
	// ErrEffectConflict: an idempotency key was reused with different
	// arguments.
	ErrEffectConflict = errors.New("idempotency key reused with different arguments")
	// ErrSchemaTooNew: the database was written by a newer Belay.
	ErrSchemaTooNew = errors.New("database schema is newer than this belay")
	// ErrNotBelay: the file is not a Belay database.
	ErrNotBelay = errors.New("not a belay database")
	// ErrWrongStatus: the run is not in a status that allows the change.
	ErrWrongStatus = errors.New("run is not in a status that allows this")
	// ErrDecided: the approval was decided already (or expired); a decision
	// is taken once.
	ErrDecided = errors.New("approval already decided")
	// ErrBindingMismatch: the decision names other arguments, another policy
	// version or another expiry than the approval it was made for.
	ErrBindingMismatch = errors.New("decision does not match the approval it was made for")
	// ErrCorrupt: the database file is damaged (SQLite found a page it
	// cannot read). A store that finds it writes nothing more to the file;
	// reads go on where the pages they need are sound.
	ErrCorrupt = errors.New("database file is corrupt")
)

// HealthChecker is a store that can find itself unfit to take writes while
// it runs: the SQLite store, once a statement has found its file damaged.
// Readiness checks and metrics ask it; a store that does not implement it
// has no such state.
type HealthChecker interface {
	// Health returns nil while the store takes writes, or why it does not:
	// an error wrapping ErrCorrupt, whose message says what to do.
	Health(ctx context.Context) error
}

// Counts is how many runs are in each status, and how many approvals wait
// for a person.
type Counts struct {
	Runs             map[Status]int64
	PendingApprovals int64
}

// WriterStats counts the writes of a store that has a writer of its own
// (the embedded SQLite store), since it was opened.
type WriterStats struct {
	// Commits is the number of transactions the writer committed.
	Commits int64
	// Writes is the number of writes they carried. With group commit it
	// exceeds Commits.
	Writes int64
	// BytesWritten approximates the payload bytes written: message content,
	// event data, run plan, guard and final answer, effect results, outbox
	// payloads.
	BytesWritten int64
	// LockWaits is the number of transactions that found another process
	// writing the same file and waited for it to step aside.
	LockWaits int64
}

// ApprovalStatus is where an approval is in its life.
type ApprovalStatus string

const (
	ApprovalPending  ApprovalStatus = "pending"
	ApprovalApproved ApprovalStatus = "approved"
	ApprovalEdited   ApprovalStatus = "edited"
	ApprovalRejected ApprovalStatus = "rejected"
	ApprovalExpired  ApprovalStatus = "expired"
)

// Approval is one tool call waiting for, or decided by, a person. It is
// unique per (Tenant, RunID, Tool, ArgsHash): a replayed step finds its
// approval and nobody is asked twice.
type Approval struct {
	ID        string
	Tenant    string
	RunID     string
	Step      int
	ToolUseID string
	Tool      string
	// Args are the exact arguments to approve; ArgsHash their canonical hash.
	Args     json.RawMessage
	ArgsHash string
	Reason   string
	Category string
	// Summary says what the call does, in plain words built by code.
	Summary       string
	PolicyVersion string
	// Binding is the hash of (tenant, run, tool, canonical arguments, policy
	// version, expiry) a decision must name.
	Binding string
	// SelfApproval says the policy lets the run's requester decide it.
	SelfApproval bool
	Status       ApprovalStatus
	ExpiresAt    time.Time
	CreatedAt    time.Time
	// EditedArgs and EditedHash are what an editor approved instead; the
	// original arguments are kept.
	EditedArgs json.RawMessage
	EditedHash string
	DecidedBy  string
	DecidedAt  time.Time
	Note       string
	// ParentEffect, on an approval of a fork's call, is the equal effect
	// the fork's parent recorded after the fork's step: the parent did this
	// already. Nil otherwise.
	ParentEffect *ParentEffect
}

// ListApprovalsParams filters approvals. Zero fields do not filter.
type ListApprovalsParams struct {
	Tenant string
	RunID  string
	Status ApprovalStatus
	Limit  int
}

// DecideParams decides a pending approval. The run goes back to the queue
// when its last pending approval is decided.
type DecideParams struct {
	Tenant string
	ID     string
	// Binding must equal the approval's.
	Binding string
	Status  ApprovalStatus
	By      string
	Note    string
	// EditedArgs and EditedHash are set for an edit.
	EditedArgs json.RawMessage
	EditedHash string
	Now        time.Time
	Events     []Event
}

// ExpireApprovalsParams expires the approvals still pending at Now whose
// expiry has passed.
type ExpireApprovalsParams struct {
	Now time.Time
}

// ExpiredApproval is one approval ExpireDueApprovals expired, as decided,
// and the trace events written with it.
type ExpiredApproval struct {
	Approval Approval
	Events   []Event
}

// Status is where a run is in its life.
type Status string

const (
	StatusQueued          Status = "queued"
	StatusRunning         Status = "running"
	StatusWaitingApproval Status = "waiting_approval"
	StatusPaused          Status = "paused"
	StatusDone            Status = "done"
	StatusFailed          Status = "failed"
	StatusEscalated       Status = "escalated"
	StatusCanceled        Status = "canceled"
)

// Terminal reports whether a run in this status will never run again.
// Escalated runs are terminal too: a person takes over.
func (s Status) Terminal() bool {
	switch s {
	case StatusDone, StatusFailed, StatusEscalated, StatusCanceled:
		return true
	}
	return false
}

// Run is one row of the runs table.
type Run struct {
	ID              string
	Tenant          string
	User            string
	ClientRequestID string
	Agent           string
	AgentVersion    string
	Input           string
	DryRun          bool
	// RequestedBy names who asked for the run (the identity of the API key
	// that started it); a requester may not approve the run's own actions
	// unless the policy allows it.
	RequestedBy string

	Status Status
	// Step counts completed steps (checkpoints after tool results).
	Step int
	// Messages is the number of messages appended so far; the next message
	// has this sequence number.
	Messages int

	InputTokens  int64
	OutputTokens int64
	ModelCalls   int64
	// CostNanoUSD is the cost so far in nanodollars.
	CostNanoUSD int64

	// Plan and Guard are opaque JSON owned by the runtime: the plan the model
	// stated and the counters the guards need on resume.
	Plan  json.RawMessage
	Guard json.RawMessage

	LeaseOwner   string
	LeaseExpires time.Time
	// LeaseEpoch grows by one on every claim. Writes are fenced by it.
	LeaseEpoch  int64
	ResumeAfter time.Time

	StopReason string
	StopDetail string
	Final      string

	// Budget is the run's limits, opaque JSON owned by the runtime: set at
	// creation, raised by operators through ResumeRun.
	Budget json.RawMessage
	// Escalation is the packet a person acts on when the run stopped for
	// one, opaque JSON owned by the runtime.
	Escalation json.RawMessage
	// ConcurrencyKey, if not empty, names what the run acts on (a customer,
	// an order): at most ConcurrencyLimit runs of one tenant with the same
	// key are running at once, across every worker of the store; the others
	// stay due and are claimed when a holder lets go. ConcurrencyLimit is 0
	// for a run without a key.
	ConcurrencyKey   string
	ConcurrencyLimit int
	// Priority orders the due runs of a tenant: higher first.
	Priority int
	// Sensitive are the secret arguments of the run's tools, by tool name,
	// as the agent version that started the run declared them: what every
	// reader redacts by, with or without the agent's code. Nil for a run
	// created before runs recorded them (SQLite schema 10, PostgreSQL 9 and
	// older): which of its values are secret is not known.
	Sensitive map[string]SensitiveArgs

	CreatedAt time.Time
	UpdatedAt time.Time

	// TakenFrom is set only on a run ClaimRuns returns: the owner whose
	// lease the claim replaced without that owner letting go of it (a
	// worker that died, froze or was cut off from the store). It is empty
	// when the run was queued, released, or due by its timer. It is not
	// stored.
	TakenFrom string
}

// SensitiveArgs says which arguments of a tool's calls are secret, as the
// agent version that started a run declared them (belay.Tool.Sensitive):
// readers of the run hide their values without the agent's code.
type SensitiveArgs struct {
	// Fields are the top-level fields whose values are secret.
	Fields []string `json:"fields"`
	// Declared are the top-level fields the tool's input schema declares,
	// if it declares any. The value of a field outside them is hidden too:
	// it may be a secret under a name the model misspelled.
	Declared []string `json:"declared,omitempty"`
}

// OutboxMessage is a notification written in the transaction of the state
// that caused it, delivered at least once.
type OutboxMessage struct {
	ID     int64
	Tenant string
	RunID  string
	// Kind is what happened: "escalation", "approval_requested", ...
	Kind        string
	Payload     json.RawMessage
	CreatedAt   time.Time
	DeliveredAt time.Time
	Attempts    int
}

// Message is one row of the append-only messages table. Content holds the
// blocks as model.EncodeBlocks wrote them.
type Message struct {
	RunID     string
	Seq       int
	Step      int
	Role      string
	Content   []byte
	CreatedAt time.Time
}

// Event is one row of a run's trace.
type Event struct {
	RunID string
	// Seq numbers the events of a run from 1, in the order they were
	// written; the store assigns it.
	Seq  int64
	Step int
	Type string
	Time time.Time
	// Data is a JSON object with the event's own fields.
	Data json.RawMessage
}

// EffectState is where an effect is in the ledger.
type EffectState string

const (
	// EffectPending: the intent is recorded; the call may have gone out.
	EffectPending EffectState = "pending"
	// EffectDone: the call's result is recorded.
	EffectDone EffectState = "done"
	// EffectUnknown: the call went out and its outcome is not known.
	EffectUnknown EffectState = "unknown"
	// EffectFailed: the tool reported that the effect was not applied. The
	// key may be begun again.
	EffectFailed EffectState = "failed"
)

// Effect is one row of the idempotency ledger.
type Effect struct {
	Tenant   string
	Key      string
	RunID    string
	Tool     string
	ArgsHash string
	Args     json.RawMessage
	State    EffectState
	Result   json.RawMessage
	Step     int
	// Attempts counts the calls that went out, or may have, under this key:
	// each is recorded before it is sent.
	Attempts int
	// Epoch is the lease epoch of the worker that sent the last call, and
	// InFlightUntil when that call, at its longest, can no longer be in
	// flight. A worker holding the run at a later epoch waits until then
	// before it asks the downstream, calls again or asks a person.
	Epoch         int64
	InFlightUntil time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// Fence names the lease a write is made under.
type Fence struct {
	RunID string
	Owner string
	Epoch int64
}

// CreateRunParams creates a run unless one exists for (Tenant, User,
// ClientRequestID).
type CreateRunParams struct {
	ID              string
	Tenant          string
	User            string
	ClientRequestID string
	Agent           string
	AgentVersion    string
	Input           string
	DryRun          bool
	RequestedBy     string
	Budget          json.RawMessage
	// ConcurrencyKey, if not empty, caps the runs of the tenant with this
	// key that are running at once at ConcurrencyLimit (0 means 1).
	ConcurrencyKey   string
	ConcurrencyLimit int
	// Priority orders the due runs of the tenant: higher first.
	Priority int
	// Sensitive are the secret arguments of the agent's tools, by tool
	// name; nil records that none has any.
	Sensitive map[string]SensitiveArgs
	// NotBefore, if after Now, creates the run paused until then (stop
	// reason not_before), for a worker to claim once it is due.
	NotBefore time.Time
	Now       time.Time
	// Events are appended with the run, in the same transaction.
	Events []Event
}

// ListRunsParams filters and pages runs. Zero fields do not filter.
type ListRunsParams struct {
	Tenant string
	Status Status
	Agent  string
	// User keeps the runs of one user (a customer).
	User  string
	Since time.Time
	// After is the ID of the last run of the previous page.
	After string
	Limit int
	// Newest lists the latest runs first; After then names the run the
	// next page starts below.
	Newest bool
}

// ClaimRunsParams claims up to Limit due runs: queued runs, running runs
// whose lease has expired, and paused runs whose ResumeAfter has passed.
// A queued or paused run with a ConcurrencyKey is due only while fewer
// than its ConcurrencyLimit runs of its tenant with that key are running
// (a running run keeps its place until it lets go, even on an expired
// lease); a claim never takes more of one key than the key has room for.
type ClaimRunsParams struct {
	Owner string
	Now   time.Time
	TTL   time.Duration
	Limit int
	// Agents, if not empty, limits the claim to runs of these agents: the
	// ones the claiming worker can run. Workers serving different agents
	// then share one database without taking each other's runs.
	Agents []string
}

// LeasedRunsParams selects running runs under a live lease.
type LeasedRunsParams struct {
	Now   time.Time
	Limit int
}

// TakeOverParams claims one run whose lease is still live but whose owner
// is known to be gone. It succeeds only if the run is still at Epoch.
type TakeOverParams struct {
	RunID string
	Epoch int64
	Owner string
	Now   time.Time
	TTL   time.Duration
}

// RunUpdate is the run state a checkpoint writes. Every field is written.
type RunUpdate struct {
	Status       Status
	Step         int
	Messages     int
	InputTokens  int64
	OutputTokens int64
	ModelCalls   int64
	CostNanoUSD  int64
	Plan         json.RawMessage
	Guard        json.RawMessage
	ResumeAfter  time.Time
	StopReason   string
	StopDetail   string
	Final        string
	Escalation   json.RawMessage
	// LeaseExpires renews the lease; zero releases it (the owner is
	// cleared, the epoch kept).
	LeaseExpires time.Time
	// KeepLease says the run stays running under the lease as it is: Status
	// must be running and ResumeAfter zero. A store may then leave the lease
	// expiry as it is (LeaseExpires still holds a valid renewal, for stores
	// that write it anyway) and skip rewriting the columns claims are
	// indexed on, which is much of the cost of a mid-run checkpoint.
	KeepLease bool
}

// EffectUpdate records the outcome of an effect whose intent exists.
type EffectUpdate struct {
	Tenant string
	Key    string
	State  EffectState
	Result json.RawMessage
}

// CheckpointParams is one fenced transaction: the run's new state, the
// messages and events it appends and the effects it settles. If the fence
// does not match, nothing is written and ErrLeaseLost is returned.
type CheckpointParams struct {
	Fence    Fence
	Now      time.Time
	Run      RunUpdate
	Messages []Message
	Events   []Event
	Effects  []EffectUpdate
	// Outbox holds notifications to deliver; Tenant and RunID are set from
	// the run.
	Outbox []OutboxMessage
	// Approvals are inserted pending; one that exists for the same (tenant,
	// run, tool, args hash) is kept as it is.
	Approvals []Approval
	// Waits are inserted pending (by a store that is a Waiter); one that
	// exists for the same (tenant, run, tool use) is kept as it is.
	Waits []Wait
}

// ResumeRunParams puts a run that waits for a person back in the queue.
type ResumeRunParams struct {
	Tenant string
	RunID  string
	Now    time.Time
	// From lists the statuses the run may be in; otherwise ErrWrongStatus.
	From []Status
	// StopReason, if not empty, is the reason the run must have stopped
	// for; otherwise ErrWrongStatus. It is checked in the transaction that
	// resumes, so a run paused again for another reason since the caller
	// read it is left alone.
	StopReason string
	// Budget, if not nil, replaces the run's budget.
	Budget json.RawMessage
	// AgentVersion, if not empty, replaces the run's agent version: an
	// operator's explicit migration of a run to the version its workers now
	// run. Empty keeps the version the run was started on.
	AgentVersion string
	// Effects are settled in the same transaction: a person's answer to an
	// outcome the run could not find out. A key never begun fails it all
	// with ErrNotFound.
	Effects []EffectUpdate
	// Events are appended in the same transaction.
	Events []Event
}

// KillSwitchParams engages or releases a kill switch. The empty tenant is
// the global switch.
type KillSwitchParams struct {
	Tenant  string
	Engaged bool
	Reason  string
	Now     time.Time
	// ResumeReason: when releasing, paused runs of the tenant (every tenant
	// for the global switch) with this stop reason go back to the queue.
	ResumeReason string
}

// BeginEffectParams records the intent of a side effect and its first call
// before the call goes out, fenced by the run's lease. Effect.InFlightUntil
// bounds that call; the fence's epoch is recorded as its sender's.
type BeginEffectParams struct {
	Fence  Fence
	Now    time.Time
	Effect Effect
	// LeaseExpires, if not zero, renews the lease in the same transaction,
	// so the call starts with the whole of it.
	LeaseExpires time.Time
	// Events are appended in the same transaction.
	Events []Event
}

// EndCallsParams names the keys of a run whose last calls have returned,
// fenced by the run's lease.
type EndCallsParams struct {
	Fence  Fence
	Now    time.Time
	Tenant string
	Keys   []string
}

// StartAttemptParams records one more call under a key whose outcome is
// not known (pending or unknown), fenced by the run's lease, before the
// call goes out.
type StartAttemptParams struct {
	Fence  Fence
	Now    time.Time
	Tenant string
	Key    string
	// InFlightUntil bounds the call about to go out.
	InFlightUntil time.Time
	// LeaseExpires, if not zero, renews the lease in the same transaction.
	LeaseExpires time.Time
	// Events are appended in the same transaction.
	Events []Event
}

// Store is a Belay database. Every method is safe for concurrent use.
type Store interface {
	// CreateRun inserts a queued run, or returns the existing run of the same
	// (Tenant, User, ClientRequestID) with created false.
	CreateRun(ctx context.Context, p CreateRunParams) (run Run, created bool, err error)
	// GetRun returns a run of a tenant, or ErrNotFound.
	GetRun(ctx context.Context, tenant, id string) (Run, error)
	// ListRuns returns runs ordered by ID (creation order), or newest first.
	ListRuns(ctx context.Context, p ListRunsParams) ([]Run, error)

	// ClaimRuns leases due runs to an owner, raising each one's epoch. A
	// claimed queued or paused run becomes running.
	ClaimRuns(ctx context.Context, p ClaimRunsParams) ([]Run, error)
	// LeasedRuns returns up to p.Limit running runs whose lease has not
	// expired by p.Now, soonest to expire first: the runs a worker may take
	// over from an owner it proves gone. It reads them by index, so it costs
	// the runs in flight, not every run that waits.
	LeasedRuns(ctx context.Context, p LeasedRunsParams) ([]Run, error)
	// TakeOver leases one run away from an owner that is gone.
	TakeOver(ctx context.Context, p TakeOverParams) (Run, error)
	// RenewLease extends a lease, or returns ErrLeaseLost.
	RenewLease(ctx context.Context, f Fence, expires time.Time) error

	// Checkpoint writes one step's state in one transaction. It returns
	// a context error only if nothing was written: once the write has
	// gone out, its outcome is waited for, so that a caller whose context
	// ended never takes a committed checkpoint for a failed one (and, say,
	// writes over it the state from before it).
	Checkpoint(ctx context.Context, p CheckpointParams) error
	// BeginEffect records an intent and its first call: a new row is
	// pending at attempt 1, with the fence's epoch and the effect's
	// InFlightUntil. If the key exists with the same ArgsHash it returns
	// the existing row and existed true, recording nothing (the caller
	// decides whether to call again, and records that with StartAttempt);
	// with a different ArgsHash it returns ErrEffectConflict. A failed row
	// begins again: it goes back to pending with Attempts raised, the
	// fence's epoch and the new InFlightUntil, and is returned with existed
	// false, as the earlier attempt is known not to have landed.
	BeginEffect(ctx context.Context, p BeginEffectParams) (e Effect, existed bool, err error)
	// EndCalls records that the last calls under these keys have returned
	// though their outcome is not known (a shutdown cut them short): their
	// InFlightUntil is cleared, so a worker that takes the run over need not
	// wait for them. Keys whose outcome is recorded are left alone.
	EndCalls(ctx context.Context, p EndCallsParams) error
	// StartAttempt records one more call under a key that is pending or
	// unknown: Attempts is raised by one and the call's epoch and
	// InFlightUntil are recorded; the state is left as it is. A key never
	// begun, or one whose outcome is recorded, fails with ErrNotFound.
	StartAttempt(ctx context.Context, p StartAttemptParams) (Effect, error)

	// Messages returns a run's messages in order.
	Messages(ctx context.Context, runID string) ([]Message, error)
	// Events returns a run's trace events in order.
	Events(ctx context.Context, runID string) ([]Event, error)
	// EventsAfter returns up to p.Limit trace events of the runs p.Runs
	// names, each run's from just after its cursor: each run's in Seq
	// order, the runs' merged in the order their events were written. A run
	// that does not exist has none. A run's events become readable in Seq
	// order: every write that appends to a run's trace numbers its events
	// while it holds the run (its row, or the store's one writer), so no
	// event commits below a Seq a reader has already seen. A reader that
	// keeps the last Seq it read of each run therefore misses nothing when
	// it reads again after it.
	EventsAfter(ctx context.Context, p EventsAfterParams) ([]Event, error)
	// Effects returns the ledger rows of a run in the order they were begun.
	Effects(ctx context.Context, tenant, runID string) ([]Effect, error)
	// Outbox returns a run's notifications in order.
	Outbox(ctx context.Context, runID string) ([]OutboxMessage, error)

	// ResumeRun queues a run that waits for a person (an operator raised its
	// budget, resolved an unknown outcome, ...) and returns it.
	ResumeRun(ctx context.Context, p ResumeRunParams) (Run, error)
	// Approvals returns approvals in creation order.
	Approvals(ctx context.Context, p ListApprovalsParams) ([]Approval, error)
	// GetApproval returns an approval of a tenant ("" for any), or
	// ErrNotFound.
	GetApproval(ctx context.Context, tenant, id string) (Approval, error)
	// DecideApproval records a decision on a pending approval: ErrDecided if
	// it is not pending or has expired (unless the decision is the expiry),
	// ErrBindingMismatch if the binding differs. When no approval of the run
	// is pending any more and the run is waiting_approval, it is queued.
	DecideApproval(ctx context.Context, p DecideParams) (Approval, error)
	// ExpireDueApprovals marks up to 100 pending approvals whose expiry has
	// passed as expired, each decided as ExpiryDecision says and with its
	// approval_expired event, and queues their runs as DecideApproval does,
	// in one transaction. It returns the approvals as decided, with the
	// events it wrote, so that the caller can tell its observers. Call it
	// again while it returns 100.
	ExpireDueApprovals(ctx context.Context, p ExpireApprovalsParams) ([]ExpiredApproval, error)
	// ExpireApprovals is ExpireDueApprovals at now, and returns how many
	// expired.
	//
	// Deprecated: use ExpireDueApprovals, which returns what it expired and
	// the events it wrote.
	ExpireApprovals(ctx context.Context, now time.Time) (int, error)

	// SetKillSwitch engages or releases a kill switch. While a tenant's
	// switch or the global one is engaged, ClaimRuns skips the tenant's runs.
	SetKillSwitch(ctx context.Context, p KillSwitchParams) error
	// Counts counts runs by status and pending approvals, over every
	// tenant: the gauges of a metrics scrape.
	Counts(ctx context.Context) (Counts, error)

	// KillSwitch reports whether the tenant's switch or the global one is
	// engaged, and why.
	KillSwitch(ctx context.Context, tenant string) (engaged bool, reason string, err error)

	// PruneRuns deletes up to p.Limit runs of every tenant that ended
	// (Status.Terminal) before p.Before, in no set order, with all they own:
	// messages, trace, ledger entries, approvals, notifications and their
	// deliveries. A run that has not ended is never deleted. It returns how
	// many runs it deleted; call it again until that is 0. A pruned run's
	// client request id names no run any more: the same request starts a
	// new one.
	PruneRuns(ctx context.Context, p PruneRunsParams) (int, error)

	Close() error
}

// EventsAfterParams reads the traces of runs from where a reader left them.
type EventsAfterParams struct {
	// Runs are the traces to read, each from just after its cursor.
	Runs []TraceCursor
	// Limit caps the events returned; zero or less returns none.
	Limit int
}

// TraceCursor is where a reader is in a run's trace: the Seq of the last
// event it has, 0 before the first.
type TraceCursor struct {
	RunID string
	After int64
}

// PruneRunsParams selects the ended runs PruneRuns deletes.
type PruneRunsParams struct {
	// Before is the cut-off: runs whose last change is older are deleted.
	Before time.Time
	// Limit caps the runs of one call, so that one transaction stays short.
	Limit int
}
