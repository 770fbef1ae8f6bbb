package client

import (
	"context"
	"encoding/json"
	"time"
)

// ReplayRequest selects the recorded runs Replay replays and what they are
// replayed on.
type ReplayRequest struct {
	// Agent is the served agent whose runs are replayed. Required.
	Agent string `json:"agent"`
	// Runs are ids of runs of the agent, at most 50; without them Status,
	// Since and Limit select the agent's newest runs.
	Runs   []string  `json:"runs,omitempty"`
	Status RunStatus `json:"status,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	// Limit is how many runs the filters keep, 1 to 50; 0: 20.
	Limit int `json:"limit,omitempty"`
	// Model is "primary" (the default) or "fallback": the agent's fallback
	// model.
	Model string `json:"model,omitempty"`
	// Version is the version name the replays run as; empty: the agent's.
	Version string `json:"version,omitempty"`
	// Policy is a policy file (YAML or JSON) that decides the replays'
	// calls instead of the agent's policy.
	Policy string `json:"policy,omitempty"`
}

// ReplayedEffect is one side effect of a replay or of its recording,
// compared: same, missing, extra or different_args.
type ReplayedEffect struct {
	Tool         string          `json:"tool"`
	Comparison   string          `json:"comparison"`
	Args         json.RawMessage `json:"args,omitempty"`
	RecordedArgs json.RawMessage `json:"recorded_args,omitempty"`
}

// ReplayResult is one recorded run replayed and compared.
type ReplayResult struct {
	RunID         string           `json:"run_id"`
	ReplayID      string           `json:"replay_id"`
	Status        RunStatus        `json:"status"`
	StopReason    string           `json:"stop_reason"`
	Verified      bool             `json:"verified"`
	Effects       []ReplayedEffect `json:"effects"`
	Same          int              `json:"same"`
	Missing       int              `json:"missing"`
	Extra         int              `json:"extra"`
	DifferentArgs int              `json:"different_args"`
	WouldHaveDone int              `json:"would_have_done"`
	Approvals     int              `json:"approvals"`
	Turns         int64            `json:"turns"`
	InputTokens   int64            `json:"input_tokens"`
	OutputTokens  int64            `json:"output_tokens"`
	CostNanoUSD   int64            `json:"cost_nano_usd"`
}

// ReplayTotal adds up the replays of one request.
type ReplayTotal struct {
	Runs          int   `json:"runs"`
	Verified      int   `json:"verified"`
	Unchanged     int   `json:"unchanged"`
	Same          int   `json:"same"`
	Missing       int   `json:"missing"`
	Extra         int   `json:"extra"`
	DifferentArgs int   `json:"different_args"`
	WouldHaveDone int   `json:"would_have_done"`
	Approvals     int   `json:"approvals"`
	Turns         int64 `json:"turns"`
	InputTokens   int64 `json:"input_tokens"`
	OutputTokens  int64 `json:"output_tokens"`
	CostNanoUSD   int64 `json:"cost_nano_usd"`
}

// Replay is the answer of Replay.
type Replay struct {
	Agent   string         `json:"agent"`
	Version string         `json:"version"`
	Model   string         `json:"model"`
	Policy  string         `json:"policy"`
	Runs    []ReplayResult `json:"runs"`
	Total   ReplayTotal    `json:"total"`
}

// Replay runs recorded runs of the key's tenant again in a sandbox on the
// server and compares each with its recording. No side effect is executed
// and nothing is written to the tenant's runs, so sending it again replays
// again. Model calls are made, and cost what they cost.
func (c *Client) Replay(ctx context.Context, req ReplayRequest) (Replay, error) {
	var r Replay
	err := c.call(ctx, post("/v1/replays", req), &r)
	return r, err
}
