package store

import (
	"encoding/json"
	"time"
)

// The catalogue of trace events: each kind by its name, and the struct its
// data encodes. The engine writes them, the operator's actions write theirs,
// the stores write the expiry of approvals (events.go), and every reader
// (metrics, tracing, the console, the CLI) decodes them through these
// types, so a field renamed here is renamed for all.
//
// The fields of each struct are in the order of their JSON names: the
// bytes are those a map would give, which is what earlier versions wrote.
// Older traces decode into these types too: a field they lack is left at
// its zero value.

// Kinds of trace events. EventApprovalExpired is in events.go.
const (
	// EventRunCreated: a run was created (RunCreatedData).
	EventRunCreated = "run_created"
	// EventScheduleFired: a schedule's firing started the run
	// (ScheduleFiredData); written with the run, after run_created.
	EventScheduleFired = "schedule_fired"
	// EventScheduleSkipped: a schedule's firing started no run, as its
	// overlap or missed-firing policy says (ScheduleSkippedData). It is in
	// no run's trace: observers see it with the schedule's tenant and
	// agent and no run id.
	EventScheduleSkipped = "schedule_skipped"
	// EventClaimed: a worker claimed the run at a new lease epoch
	// (ClaimedData).
	EventClaimed = "claimed"
	// EventReleased: a worker let go of the run for another to take at once
	// (ReleasedData).
	EventReleased = "released"
	// EventModelCall: a model response, made durable before any tool runs
	// (ModelCallData).
	EventModelCall = "model_call"
	// EventModelFallback: the primary model was overloaded and the
	// fallback answered (ModelFallbackData).
	EventModelFallback = "model_fallback"
	// EventToolCall: a tool call about to be answered (ToolCallData).
	EventToolCall = "tool_call"
	// EventToolResult: a tool call's answer (ToolResultData).
	EventToolResult = "tool_result"
	// EventToolRetry: a call failed in a way calling again may cure and is
	// made again after a backoff (ToolRetryData).
	EventToolRetry = "tool_retry"
	// EventBreaker: a tool's circuit breaker changed state (BreakerData).
	EventBreaker = "breaker"
	// EventIntent: a side effect's intent was recorded under its key
	// (IntentData).
	EventIntent = "intent"
	// EventEffectReused: the ledger answered a side effect already done
	// (EffectData).
	EventEffectReused = "effect_reused"
	// EventEffectUnknown: a side effect's call went out and its outcome is
	// not known (EffectUnknownData).
	EventEffectUnknown = "effect_unknown"
	// EventEffectInFlight: a worker that took the run over waits until its
	// predecessor's call can no longer be in flight (EffectInFlightData).
	EventEffectInFlight = "effect_in_flight"
	// EventReconcile: the downstream was asked what became of a side effect
	// (ReconcileData).
	EventReconcile = "reconcile"
	// EventCheckpoint: a step's tool results are durable (CheckpointData).
	EventCheckpoint = "checkpoint"
	// EventLoopDetected: the stuck-loop detector fired (LoopDetectedData).
	EventLoopDetected = "loop_detected"
	// EventApprovalRequested: a call waits for a person
	// (ApprovalRequestedData).
	EventApprovalRequested = "approval_requested"
	// EventApprovalDecided: a person decided an approval
	// (ApprovalDecidedData).
	EventApprovalDecided = "approval_decided"
	// EventApprovalApplied: a decision was applied to its call when the
	// turn ran again (ApprovalAppliedData).
	EventApprovalApplied = "approval_applied"
	// EventVerify: a requirement was checked against the world
	// (VerifyData).
	EventVerify = "verify"
	// EventStop: the run stopped: ended, paused or waiting (StopData).
	EventStop = "stop"
	// EventResumed: an operator resumed a paused run (ResumedData).
	EventResumed = "resumed"
	// EventMigrated: an operator moved a run to another agent version
	// (MigratedData).
	EventMigrated = "migrated"
	// EventOutcomeResolved: a person answered an unknown outcome
	// (OutcomeResolvedData).
	EventOutcomeResolved = "outcome_resolved"
	// EventCanceled: an operator canceled the run (CanceledData).
	EventCanceled = "canceled"
)

// RunCreatedData is a run_created event.
type RunCreatedData struct {
	Agent  string `json:"agent"`
	DryRun bool   `json:"dry_run"`
	// Tools is the fingerprint of the tools of the run's version (see
	// belay.Agent.ContinuesSameTools); empty in traces from before it.
	Tools   string `json:"tools,omitempty"`
	User    string `json:"user"`
	Version string `json:"version"`
}

// ScheduleFiredData is a schedule_fired event: which schedule, and the
// firing the run is for.
type ScheduleFiredData struct {
	Schedule string    `json:"schedule"`
	Spec     string    `json:"spec"`
	FiringAt time.Time `json:"firing_at"`
	// LateS is how long after the firing's time the run was started, in
	// seconds.
	LateS float64 `json:"late_s"`
}

// Reasons a schedule's firing is skipped (ScheduleSkippedData.Reason).
const (
	// ScheduleSkippedOverlap: the previous firing's run had not ended and
	// the overlap policy is skip.
	ScheduleSkippedOverlap = "overlap"
	// ScheduleSkippedMissed: the firing was missed (no worker ran at its
	// time) and the missed-firing policy is skip.
	ScheduleSkippedMissed = "missed"
)

// ScheduleSkippedData is a schedule_skipped event.
type ScheduleSkippedData struct {
	Schedule string    `json:"schedule"`
	FiringAt time.Time `json:"firing_at"`
	Reason   string    `json:"reason"`
}

// ClaimedData is a claimed event: the epoch and owner of the new lease,
// whether the run had steps before (it resumes), and the owner whose lease
// the claim took over without its letting go (Run.TakenFrom), if any.
type ClaimedData struct {
	Epoch     int64  `json:"epoch"`
	Owner     string `json:"owner"`
	Resumed   bool   `json:"resumed"`
	TakenFrom string `json:"taken_from,omitempty"`
}

// ReleasedData is a released event.
type ReleasedData struct {
	Epoch int64 `json:"epoch"`
}

// ModelCallData is a model_call event: what the response cost and what it
// asked for.
type ModelCallData struct {
	CostUSD      float64         `json:"cost_usd"`
	InputTokens  int64           `json:"input_tokens"`
	LatencyMS    float64         `json:"latency_ms"`
	Model        string          `json:"model"`
	OutputTokens int64           `json:"output_tokens"`
	Plan         []string        `json:"plan,omitempty"`
	PlanVersion  int             `json:"plan_version,omitempty"`
	StopReason   string          `json:"stop_reason"`
	Thought      string          `json:"thought"`
	ToolCalls    []ToolCallBrief `json:"tool_calls"`
}

// ToolCallBrief is one call a model response asks for, its arguments
// redacted.
type ToolCallBrief struct {
	Args json.RawMessage `json:"args"`
	ID   string          `json:"id"`
	Name string          `json:"name"`
}

// ModelFallbackData is a model_fallback event.
type ModelFallbackData struct {
	Error string `json:"error"`
	From  string `json:"from"`
	To    string `json:"to"`
}

// ToolCallData is a tool_call event; Effect is the tool's effect class,
// empty for a tool the agent does not have. Args are redacted.
type ToolCallData struct {
	Args   json.RawMessage `json:"args"`
	Effect string          `json:"effect,omitempty"`
	ID     string          `json:"id"`
	Tool   string          `json:"tool"`
}

// ToolResultData is a tool_result event: a call's answer, as far as the
// trace keeps it.
type ToolResultData struct {
	ID      string `json:"id"`
	IsError bool   `json:"is_error"`
	Preview string `json:"preview"`
	Tool    string `json:"tool"`
	// UnknownTool marks a call of a tool the agent does not have: its name
	// is the model's, and metrics do not take it for a label.
	UnknownTool bool `json:"unknown_tool,omitempty"`
}

// ToolRetryData is a tool_retry event; BackoffS is the wait before the
// next call, in seconds.
type ToolRetryData struct {
	Attempt  int     `json:"attempt"`
	BackoffS float64 `json:"backoff_s"`
	Error    string  `json:"error"`
	Tool     string  `json:"tool"`
}

// BreakerData is a breaker event: a tool's circuit breaker went from one
// state (closed, open, half-open) to another.
type BreakerData struct {
	From string `json:"from"`
	To   string `json:"to"`
	Tool string `json:"tool"`
}

// IntentData is an intent event.
type IntentData struct {
	Effect string `json:"effect"`
	Key    string `json:"key"`
	Tool   string `json:"tool"`
}

// EffectData names a side effect: an effect_reused event.
type EffectData struct {
	Key  string `json:"key"`
	Tool string `json:"tool"`
	// EarlierRun is the run that did the effect, when it was another run
	// (a tool of ScopeTenant).
	EarlierRun string `json:"earlier_run,omitempty"`
}

// EffectUnknownData is an effect_unknown event: the call's error, and
// which call under the key it was.
type EffectUnknownData struct {
	Attempt int    `json:"attempt"`
	Error   string `json:"error"`
	Key     string `json:"key"`
	Tool    string `json:"tool"`
}

// EffectInFlightData is an effect_in_flight event: the epoch of the worker
// whose call may still be in flight, and until when the run waits.
type EffectInFlightData struct {
	Epoch int64     `json:"epoch"`
	Key   string    `json:"key"`
	Tool  string    `json:"tool"`
	Until time.Time `json:"until"`
}

// ReconcileData is a reconcile event: whether the downstream had the
// effect, or why it could not be asked.
type ReconcileData struct {
	Error string `json:"error"`
	Found bool   `json:"found"`
	Key   string `json:"key"`
	Tool  string `json:"tool"`
}

// CheckpointData is a checkpoint event: the conversation's length and the
// run's spend so far.
type CheckpointData struct {
	CostUSD  float64 `json:"cost_usd"`
	Messages int     `json:"messages"`
}

// LoopDetectedData is a loop_detected event: which detector, how many
// times it has fired in the run, and what was done (replan or escalate).
type LoopDetectedData struct {
	Action   string `json:"action"`
	Detector string `json:"detector"`
	Fired    int    `json:"fired"`
}

// ApprovalRequestedData is an approval_requested event; Args are redacted.
type ApprovalRequestedData struct {
	ApprovalID string          `json:"approval_id"`
	Args       json.RawMessage `json:"args"`
	Category   string          `json:"category"`
	ExpiresAt  time.Time       `json:"expires_at"`
	Reason     string          `json:"reason"`
	Summary    string          `json:"summary"`
	Tool       string          `json:"tool"`
}

// ApprovalDecidedData is an approval_decided event: who decided what, and
// how long after the request (DecisionS, in seconds). EditedArgs are
// redacted.
type ApprovalDecidedData struct {
	ApprovalID string          `json:"approval_id"`
	By         string          `json:"by"`
	Category   string          `json:"category"`
	DecisionS  float64         `json:"decision_s"`
	EditedArgs json.RawMessage `json:"edited_args"`
	Note       string          `json:"note"`
	Status     ApprovalStatus  `json:"status"`
	Tool       string          `json:"tool"`
}

// ApprovalAppliedData is an approval_applied event.
type ApprovalAppliedData struct {
	ApprovalID string         `json:"approval_id"`
	By         string         `json:"by"`
	Status     ApprovalStatus `json:"status"`
}

// VerifyData is a verify event: a requirement and whether it held, or the
// error its check returned.
type VerifyData struct {
	Error       string `json:"error,omitempty"`
	OK          bool   `json:"ok"`
	Requirement string `json:"requirement"`
}

// StopData is a stop event. A run stopped by its budget also says what was
// used, what the next call would have taken and the limit, in Unit.
type StopData struct {
	Detail      string     `json:"detail,omitempty"`
	Limit       *float64   `json:"limit,omitempty"`
	NextCall    *float64   `json:"next_call,omitempty"`
	Reason      string     `json:"reason"`
	ResumeAfter *time.Time `json:"resume_after,omitempty"`
	Status      Status     `json:"status"`
	Unit        string     `json:"unit,omitempty"`
	Used        *float64   `json:"used,omitempty"`
}

// ResumedData is a resumed event: who resumed the run, why it had stopped,
// and what its budget was raised by.
type ResumedData struct {
	AddInputTokens  int64   `json:"add_input_tokens"`
	AddOutputTokens int64   `json:"add_output_tokens"`
	AddTimeS        float64 `json:"add_time_s"`
	AddTurns        int     `json:"add_turns"`
	AddUSD          float64 `json:"add_usd"`
	By              string  `json:"by"`
	StopReason      string  `json:"stop_reason"`
}

// MigratedData is a migrated event.
type MigratedData struct {
	Agent string `json:"agent"`
	By    string `json:"by"`
	From  string `json:"from"`
	To    string `json:"to"`
	// Tools is the fingerprint of the tools of version To, when the mover
	// knew it; empty otherwise.
	Tools string `json:"tools,omitempty"`
}

// OutcomeResolvedData is an outcome_resolved event.
type OutcomeResolvedData struct {
	Applied bool   `json:"applied"`
	By      string `json:"by"`
	Key     string `json:"key"`
	Tool    string `json:"tool"`
}

// CanceledData is a canceled event: who canceled, why, and the status the
// run had.
type CanceledData struct {
	By   string `json:"by"`
	Note string `json:"note"`
	Was  Status `json:"was"`
}

// DecodeEvent decodes an event's data into the catalogue's type for kind
// T. A field an older trace lacks is left at its zero value.
func DecodeEvent[T any](ev Event) (T, error) {
	var data T
	err := json.Unmarshal(ev.Data, &data)
	return data, err
}
