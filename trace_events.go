package belay

import (
	"encoding/json"

	"github.com/belayrun/belay/model"
)

// The events every step writes, as types: encoding a struct costs a third
// of encoding the same map, and these four are most of a step's trace. Their
// fields are in the order of their JSON names, so the bytes are those a map
// gives; the rarer events stay maps.

// modelCallEvent is a model response: what it cost and what it asked for.
type modelCallEvent struct {
	CostUSD      float64          `json:"cost_usd"`
	InputTokens  int64            `json:"input_tokens"`
	LatencyMS    float64          `json:"latency_ms"`
	Model        string           `json:"model"`
	OutputTokens int64            `json:"output_tokens"`
	Plan         []string         `json:"plan,omitempty"`
	PlanVersion  int              `json:"plan_version,omitempty"`
	StopReason   model.StopReason `json:"stop_reason"`
	Thought      string           `json:"thought"`
	ToolCalls    []toolCallBrief  `json:"tool_calls"`
}

// toolCallBrief is one call a model response asks for.
type toolCallBrief struct {
	Args json.RawMessage `json:"args"`
	ID   string          `json:"id"`
	Name string          `json:"name"`
}

// toolCallEvent is a call about to be answered; Effect is empty for a tool
// the agent does not have.
type toolCallEvent struct {
	Args   json.RawMessage `json:"args"`
	Effect EffectClass     `json:"effect,omitempty"`
	ID     string          `json:"id"`
	Tool   string          `json:"tool"`
}

// toolResultEvent is a call's answer, as far as the trace keeps it.
type toolResultEvent struct {
	ID      string `json:"id"`
	IsError bool   `json:"is_error"`
	Preview string `json:"preview"`
	Tool    string `json:"tool"`
	// UnknownTool marks a call of a tool the agent does not have: its
	// name is the model's, and metrics do not take it for a label.
	UnknownTool bool `json:"unknown_tool,omitempty"`
}

// checkpointEvent closes a step: the conversation's length and the run's
// spend so far.
type checkpointEvent struct {
	CostUSD  float64 `json:"cost_usd"`
	Messages int     `json:"messages"`
}
